#!/bin/sh
# Benchmark-only (never part of bootstrap or CI): training speed of libtensor beside
# libtorch 1.13 in one run (tools/bench/bench_train.cpp): the issue-15 CNN's and the vit's
# training images/s at batch 128, the issue-14 MLP 784-512-512-10 step at batch 256, the tape cost
# per tracked op, and issue 13's two small-CNN conv rows. Both run on THREADS threads
# (default 2). Then, where Debian's python3-torch is installed or installable, the same
# CNN step in PyTorch from Python (the issue names python3-torch; it runs the same libtorch
# engine plus Python's per-op overhead, so the C++ libtorch row is the stricter one).
# Installs libtorch-dev / python3-torch with apt when missing and run as root; prints a
# message and exits 0 where libtorch cannot be had.
#   scripts/bench-train.sh [BUILD_DIR] [-- ARGS...]   (ARGS: --steps N, --only cnn|vit|mlp|tape|conv)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" 2>/dev/null && pwd || echo "$build")  # absolute: it goes into the rpath
[ "${1:-}" = "--" ] && shift
threads=${THREADS:-2}
if [ ! -f "$build/libtensor.so" ]; then
  echo "bench-train: no $build/libtensor.so; build libtensor first (meson compile -C $build)" >&2
  exit 2
fi
apt_install() {
  [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >/dev/null
}
if [ ! -f /usr/include/torch/csrc/api/include/torch/torch.h ]; then
  echo "bench-train: installing libtorch-dev (benchmark only)"
  if ! apt_install libtorch-dev; then
    echo "bench-train: libtorch-dev is not installed and could not be installed; skipped"
    exit 0
  fi
fi
out="$build/bench_train"
srcs="$root/tools/bench/bench_train.cpp $root/tools/train/model.cpp"
stale=0
[ -x "$out" ] || stale=1
for f in $srcs "$root/tools/train/model.hpp" "$build/libtensor.so"; do [ "$f" -nt "$out" ] 2>/dev/null && stale=1; done
if [ "$stale" = 1 ]; then
  echo "bench-train: compiling $out"
  # shellcheck disable=SC2086
  g++ -std=c++20 -O2 -DNDEBUG -w \
    -I"$root" -I"$root/lib/include" -I"$build/lib/include" -I"$root/tools/train" \
    -I/usr/include/torch/csrc/api/include \
    $srcs -o "$out" \
    -L"$build" -Wl,-rpath,"$build" -ltensor -ltorch -ltorch_cpu -lc10 -lpthread
fi
export OMP_NUM_THREADS="$threads"
echo "load before: $(cat /proc/loadavg)"
"$out" --threads "$threads" "$@"
echo "load after: $(cat /proc/loadavg)"
case " $* " in *" --only "*) exit 0 ;; esac
# Debian's interpreter (python3-torch installs there), not whatever python3 PATH finds first.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  if apt-cache policy python3-torch 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    echo "bench-train: installing python3-torch (benchmark only)"
    apt_install python3-torch || true
  fi
fi
if "$py" -c 'import torch' 2>/dev/null; then
  echo "load before: $(cat /proc/loadavg)"
  "$py" "$root/tools/bench/bench_train.py" --threads "$threads"
  echo "load after: $(cat /proc/loadavg)"
else
  echo "bench-train: python3-torch not available; the libtorch C++ rows above stand for PyTorch"
fi
