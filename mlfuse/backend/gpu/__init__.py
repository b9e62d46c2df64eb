"""GPU backend: kernel dialect -> llvm dialect + NVVM -> PTX (llvmlite's NVPTX) -> ptxas -> CUDA.

- `targets`: what mapping and checking need to know about sm_80 and sm_90 GPUs;
- `mapping`, `codegen`: fusion groups -> `kernel.func`s and a host function of launches;
- `lowering`: kernel-dialect ops -> llvm dialect with NVVM intrinsics;
- `translate`, `ptx`: llvm dialect -> llvmlite -> PTX text;
- `ptxas`: assembles PTX and reads its resource report;
- `runtime`: runs the kernels through pycuda or cuda-python (imported only when used).
"""
