"""Running what was built: load a library with the TVM runtime (load.py) after checking the file
(library_check.py) through the descriptor it is loaded from (library_file.py), and a Relax VM over
it (vm.py). All of it works in a TVM installed without its compiler."""
