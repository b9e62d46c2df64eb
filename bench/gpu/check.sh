#!/usr/bin/env bash
# The device check: mlfuse's GPU kernels on a lent GPU machine (nothing downloadable there), < 8 min.
#
# On the developer machine, once (fetches the pure-Python wheels mlfuse needs that the device's
# Python lacks: xdsl, immutabledict, ordered-set, into the git-ignored .whl/):
#     bash bench/gpu/prepare.sh
# then one device call, from the repository root:
#     run(command="bash bench/gpu/check.sh", carry=[".whl"], timeout_s=540)
# Results come back in $OUT (gpu-check.{log,json,jsonl,md}, gpu-check-cuda-python.jsonl):
# copy them into bench/results/ and commit them. Without $OUT they are written to bench/results/.
#
# Steps (each timed in the log):
# 1. the machine: GPU, driver, python, torch, llvmlite;
# 2. mlfuse and the carried wheels installed into /tmp/mlfuse-site (no index, no build isolation);
# 3. pycuda built in place from the vendored sdist (bench/gpu/vendor/pycuda-*.tar.gz) against
#    $CUDA_ROOT with all cores; if that fails, cuda-python's driver bindings (preinstalled) are used
#    (MLFUSE_GPU_DRIVER=simulator: a dry run on the CPU simulator, CHECK_GRAPHS=a,b: some graphs);
# 4. bench/gpu/check.py: every graph of tests/gpu_graphs and bench/graphs against numpy, timed
#    against torch eager, torch.compile and a device-to-device copy;
# 5. two graphs again through the other driver binding (cuda-python), correctness only.
set -u
START=$(date +%s)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
PY="${PY:-python3}"
BUDGET_S="${BUDGET_S:-450}"  # the whole script; check.py gets what steps 1-3 leave
export PYTHONUNBUFFERED=1

step() { echo "== [$(( $(date +%s) - START )) s] $*"; }

check() {
  step "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  "$PY" -c "import sys, numpy, torch, llvmlite; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__, 'llvmlite', llvmlite.__version__)" 2>&1

  step "mlfuse and its pure-Python dependencies into /tmp/mlfuse-site"
  SITE=/tmp/mlfuse-site
  rm -rf "$SITE" && mkdir -p "$SITE"
  if ! "$PY" -c "import xdsl" 2>/dev/null; then
    WHEELS=$(ls .whl/*.whl 2>/dev/null)
    if [ -z "$WHEELS" ]; then
      echo "xdsl is not installed here and no wheels were carried: run bench/gpu/prepare.sh, then carry .whl"
      return 2
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" $WHEELS || return 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$SITE" . || return 2
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  "$PY" -c "import mlfuse.api, xdsl; print('mlfuse', mlfuse.__version__, 'xdsl', xdsl.__version__ if hasattr(xdsl, '__version__') else '')" || return 2

  step "pycuda from the vendored sdist"
  if [ ! -e "${CUDA_ROOT:-/usr/local/cuda}/include/cuda.h" ] && command -v nvcc >/dev/null; then
    CUDA_ROOT=$(dirname "$(dirname "$(command -v nvcc)")")
  fi
  export CUDA_ROOT="${CUDA_ROOT:-/usr/local/cuda}"
  SDIST=$(ls bench/gpu/vendor/pycuda-*.tar.gz 2>/dev/null | head -1)
  DRIVER=cuda-python
  if [ "${MLFUSE_GPU_DRIVER:-}" = simulator ]; then  # a dry run of this script without a GPU
    DRIVER=simulator
  elif [ -n "$SDIST" ] && [ -e "$CUDA_ROOT/include/cuda.h" ]; then
    BUILD_START=$(date +%s)
    rm -rf /tmp/pycuda-build && mkdir -p /tmp/pycuda-build && tar xzf "$SDIST" -C /tmp/pycuda-build
    SRC=$(ls -d /tmp/pycuda-build/pycuda-*)
    if (cd "$SRC" && "$PY" configure.py --cuda-root="$CUDA_ROOT" --no-cuda-enable-curand >/dev/null \
          && timeout 240 "$PY" setup.py -q build_ext --inplace -j "$(nproc)" >/tmp/pycuda-build.log 2>&1); then
      echo "pycuda build: $(( $(date +%s) - BUILD_START )) s (CUDA_ROOT=$CUDA_ROOT, $(nproc) jobs)"
      if PYTHONPATH="$SRC:$PYTHONPATH" "$PY" -c "import pycuda.driver as d; d.init(); print('pycuda', d.get_version(), d.Device(0).name())"; then
        export PYTHONPATH="$SRC:$PYTHONPATH"
        DRIVER=pycuda
      fi
    else
      echo "pycuda build failed after $(( $(date +%s) - BUILD_START )) s:"; tail -15 /tmp/pycuda-build.log
    fi
  else
    echo "no sdist or no CUDA headers at $CUDA_ROOT: cuda-python's driver bindings are used"
  fi
  export MLFUSE_GPU_DRIVER=$DRIVER
  step "driver binding: $DRIVER"

  LEFT=$(( BUDGET_S - ($(date +%s) - START) - 45 ))  # 45 s kept for the second binding
  step "graphs ($LEFT s)"
  timeout $(( LEFT + 30 )) "$PY" bench/gpu/check.py --out "$OUT" --budget-s "$LEFT" ${CHECK_GRAPHS:+--graphs "$CHECK_GRAPHS"}
  STATUS=$?

  if [ "$DRIVER" = pycuda ]; then
    step "the cuda-python binding too (correctness only)"
    MLFUSE_GPU_DRIVER=cuda-python timeout 60 "$PY" bench/gpu/check.py --out "$OUT" --no-timing --budget-s 40 \
      --tag gpu-check-cuda-python --graphs gpu_graphs/layernorm,gpu_graphs/center_global
  fi
  step "done (check.py exit status $STATUS)"
  return $STATUS
}

check 2>&1 | tee "$OUT/gpu-check.log"
exit "${PIPESTATUS[0]}"
