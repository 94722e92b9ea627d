#!/bin/sh
# Benchmark-only: issue 12's table (tensor ops), issue 13's (module ops) and issue 32's
# (dynamic int8 Linear against libtorch's quantized::linear_dynamic), libtensor
# beside libtorch in one process
# (tools/bench/bench_torch.cpp). Installs Debian's libtorch-dev if it is missing (never
# part of bootstrap or CI), compiles the program with g++ against an already built
# libtensor, and runs it. Usage: scripts/bench-torch.sh [BUILD_DIR] [-- ARGS...]
# (ARGS: --threads N, --reps N, --only ops|nn|quant, --filter SUBSTR). OMP_WAIT_POLICY defaults
# to passive: spinning OpenMP workers (libtorch's, BLIS's) would take the cores from the
# other library's rows. Prints a message and exits 0 where libtorch cannot be installed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
if [ ! -f "$build/libtensor.so" ]; then
  echo "bench-torch: no $build/libtensor.so; build libtensor first (meson compile -C $build)" >&2
  exit 2
fi
if [ ! -f /usr/include/torch/csrc/api/include/torch/torch.h ]; then
  echo "bench-torch: installing libtorch-dev (benchmark only)"
  if ! { [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libtorch-dev; }; then
    echo "bench-torch: libtorch-dev is not installed and could not be installed; skipped"
    exit 0
  fi
fi
out="$build/bench_torch"
if [ ! -x "$out" ] || [ "$root/tools/bench/bench_torch.cpp" -nt "$out" ] || [ "$build/libtensor.so" -nt "$out" ]; then
  echo "bench-torch: compiling $out"
  g++ -std=c++20 -O2 -DNDEBUG -w -fopenmp \
    -I"$root" -I"$root/lib/include" -I"$build/lib/include" \
    -I/usr/include/torch/csrc/api/include \
    "$root/tools/bench/bench_torch.cpp" -o "$out" \
    -L"$build" -Wl,-rpath,"$build" -ltensor -ltorch -ltorch_cpu -lc10 -ldnnl -lpthread
fi
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
echo "load: $(cat /proc/loadavg)"
"$out" "$@"
echo "load: $(cat /proc/loadavg)"
