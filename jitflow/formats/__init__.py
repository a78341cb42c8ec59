"""Readers (and, for the library blob, a writer) of the binary formats jitflow handles: TVM's
imports blob, CUDA fatbins and cubins, ELF libraries, the Relax VM program, ptxas' log. They need
no CUDA tools, and malformed input only ever raises LibraryFormatError."""
