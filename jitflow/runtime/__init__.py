"""Running what was built: load a library with the TVM runtime (load.py), a Relax VM over it (vm.py).
Both work in a TVM installed without its compiler."""
