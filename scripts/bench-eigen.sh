#!/bin/sh
# Benchmark-only: libtensor beside Eigen 3.4 in one process (tools/bench/bench_eigen.cpp):
# Eigen's Matrix products and its Tensor module on a ThreadPoolDevice against libtensor
# on the same rows, interleaved rounds, medians, ratio = Eigen / libtensor (> 1: libtensor
# is faster). Installs Debian's libeigen3-dev (header-only) if it is missing (never part
# of bootstrap, CI or the tests), compiles the program with g++ -O3 -march=native against
# an already built libtensor, and runs it. Usage: scripts/bench-eigen.sh [BUILD_DIR]
# [-- ARGS...] (ARGS: --reps N, --filter SUBSTR). Threads: OMP_NUM_THREADS (default 2)
# for both libraries. OMP_WAIT_POLICY defaults to passive, as in bench-torch.sh. Prints a
# message and exits 0 where libeigen3-dev cannot be installed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
if [ ! -f "$build/libtensor.so" ]; then
  echo "bench-eigen: no $build/libtensor.so; build libtensor first (meson compile -C $build)" >&2
  exit 2
fi
if [ ! -f /usr/include/eigen3/unsupported/Eigen/CXX11/Tensor ]; then
  echo "bench-eigen: installing libeigen3-dev (benchmark only)"
  if ! { [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libeigen3-dev; }; then
    echo "bench-eigen: libeigen3-dev is not installed and could not be installed; skipped"
    exit 0
  fi
fi
out="$build/bench_eigen"
if [ ! -x "$out" ] || [ "$root/tools/bench/bench_eigen.cpp" -nt "$out" ] || [ "$build/libtensor.so" -nt "$out" ]; then
  echo "bench-eigen: compiling $out"
  g++ -std=c++20 -O3 -march=native -DNDEBUG -w -fopenmp -pthread \
    -I"$root" -I"$root/lib/include" -I"$build/lib/include" -I/usr/include/eigen3 \
    "$root/tools/bench/bench_eigen.cpp" -o "$out" \
    -L"$build" -Wl,-rpath,"$build" -ltensor -lpthread
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
echo "load: $(cat /proc/loadavg)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|avx512_fp16|amx_bf16|amx_int8|avx2)$' | tr '\n' ' ')"
"$out" "$@"
echo "load: $(cat /proc/loadavg)"
