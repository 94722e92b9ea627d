#!/usr/bin/env bash
# Measures det / lu / qr (64, 256, 512) through the composed path against LAPACK
# (tools/bench/linalg_lapack.cpp). Needs a built build/ (BUILD_DIR) and liblapack-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
c++ -std=c++20 -O2 -Ilib/include -I"$B/lib/include" tools/bench/linalg_lapack.cpp -o "$B/linalg_lapack" \
  -L"$B" -Wl,-rpath,"$PWD/$B" -ltensor -llapack
TENSOR_DEVICE=cpu "$B/linalg_lapack"
