"""mlfuse: an MLIR-style fusion compiler on xDSL."""
