"""Readers (and, for the library blob, a writer) of the binary formats jitflow handles: TVM's
imports blob, CUDA fatbins and cubins, ELF libraries, the Relax VM program, ptxas' log. They need
no CUDA tools, and malformed input only ever raises LibraryFormatError."""

#: the kind of the module that holds a Relax VM executable (its bytecode and constants): how the blob
#: names it, and how a loaded library tells a model from kernels (without importing a reader)
VM_KIND = "relax.VMExecutable"
