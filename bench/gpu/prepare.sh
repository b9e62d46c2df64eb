#!/usr/bin/env bash
# Before a device check (bench/gpu/check.sh), on the developer machine: the wheels of the
# pure-Python packages mlfuse imports that the device's Python does not have, at the versions
# of this venv, into the git-ignored .whl/ that the device call carries:
#     bash bench/gpu/prepare.sh
#     run(command="bash bench/gpu/check.sh", carry=[".whl"], timeout_s=540)
# (xdsl's wheel is 4.6 MB, too large to vendor in git like the 1.7 MB pycuda sdist.)
set -eu
cd "$(dirname "$0")/../.."
PIP="${PIP:-.venv/bin/pip}"
mkdir -p .whl
rm -f .whl/*.whl
for name in xdsl immutabledict ordered-set; do
  version=$("$PIP" show "$name" | sed -n 's/^Version: //p')
  "$PIP" download -q --no-deps --only-binary=:all: -d .whl "$name==$version"
done
ls -la .whl
