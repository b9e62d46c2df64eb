"""mlfuse's dialects: graph (tensors), fusion (kernels), loop (affine loop nests), kernel (GPU)."""
