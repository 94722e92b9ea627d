#!/usr/bin/env bash
# Runs the fuzz decoder (tests/fuzz/) under libFuzzer for SECONDS (default 60):
#   bash scripts/fuzz.sh 600             # cpu
#   TENSOR_FUZZ_DEVICE=vulkan bash scripts/fuzz.sh 120
# The target is compiled with clang-14 (-fsanitize=fuzzer,address,undefined) and linked
# against the libtensor.so of BUILD_DIR (default build/, built by meson as usual), so
# no second library build is needed; the coverage guidance then covers the decoder's
# branches, not the library's. New inputs go to $WORK_DIR/corpus (seeded from the
# committed corpus), findings to $WORK_DIR/crash-*; reproduce one without clang with
#   build/tests/fuzz_run --device cpu $WORK_DIR/crash-<sha1>
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
WORK_DIR="${WORK_DIR:-$BUILD_DIR/fuzz}"
CXX="${FUZZ_CXX:-clang++-14}"
LIB="$BUILD_DIR/libtensor.so"
[ -e "$LIB" ] || { echo "fuzz.sh: $LIB not found; build first (meson compile -C $BUILD_DIR)" >&2; exit 2; }
command -v "$CXX" >/dev/null || { echo "fuzz.sh: $CXX not found (Debian: apt-get install clang-14)" >&2; exit 2; }
mkdir -p "$WORK_DIR/corpus"
cp -n "$ROOT"/tests/fuzz/corpus/* "$WORK_DIR/corpus/" 2>/dev/null || true
"$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I "$ROOT/lib/include" -I "$BUILD_DIR/lib/include" \
  "$ROOT/tests/fuzz/decoder.cpp" "$ROOT/tests/fuzz/fuzz_target.cpp" -o "$WORK_DIR/fuzz_target" \
  -L "$BUILD_DIR" -ltensor -Wl,-rpath,"$BUILD_DIR"
cd "$WORK_DIR"
# The library is not built with ASan: leak checks would report its caches.
ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}" ./fuzz_target -max_total_time="$SECONDS_TO_RUN" -max_len=512 \
  -print_final_stats=1 corpus
