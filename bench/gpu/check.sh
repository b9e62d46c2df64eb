#!/usr/bin/env bash
# Device check for a lent GPU machine (nothing downloadable there); fits in ~8 minutes.
#   run from the repository root:  bash bench/gpu/check.sh
# 1. pycuda from the carried sdist (bench/gpu/vendor/pycuda-*.tar.gz), timed; if there is
#    none or the build fails, cuda-python's driver bindings (preinstalled there) are used;
# 2. every graph (tests/gpu_graphs, bench/suite) against the numpy reference;
# 3. timings: mlfuse vs a device-to-device copy of the same bytes (and torch when present).
# Results go to $OUT (the device keeps nothing): copy them into bench/results/.
set -u
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
PY="${PY:-python3}"
export CUDA_ROOT="${CUDA_ROOT:-/usr/local/cuda}"
{
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  SDIST=$(ls bench/gpu/vendor/pycuda-*.tar.gz 2>/dev/null | head -1)
  if [ -n "$SDIST" ]; then
    echo "== building pycuda from $SDIST (CUDA_ROOT=$CUDA_ROOT)"
    start=$(date +%s)
    timeout 300 "$PY" -m pip install --no-index --no-build-isolation "$SDIST" 2>&1 | tail -3
    echo "pycuda build: $(( $(date +%s) - start )) s"
  else
    echo "== no pycuda sdist carried: using cuda-python's driver bindings"
  fi
  echo "== graphs"
  timeout 360 "$PY" bench/gpu/check.py --out "$OUT/gpu-check.json"
} 2>&1 | tee "$OUT/gpu-check.log"
