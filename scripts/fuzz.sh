#!/usr/bin/env bash
# Runs the fuzz decoder (tests/fuzz/) under libFuzzer for SECONDS (default 60):
#   bash scripts/fuzz.sh 600             # cpu
#   TENSOR_FUZZ_DEVICE=vulkan bash scripts/fuzz.sh 120
# The library itself is built with clang-14 and -fsanitize=fuzzer-no-link,address,undefined
# in FUZZ_BUILD_DIR (default build-fuzz/, or build-fuzz-vulkan/ for a vulkan device; only
# the libtensor target, without OpenMP, so the run is single-threaded and repeatable),
# so coverage guidance and the sanitizers see the library's code, not only the decoder's.
# The decoder is linked against it with -fsanitize=fuzzer,address,undefined.
# New inputs go to $WORK_DIR/corpus (seeded from the committed corpus), findings to
# $WORK_DIR/crash-*; reproduce one without clang with
#   build/tests/fuzz_run --device cpu $WORK_DIR/crash-<sha1>
# and add it to tests/fuzz/corpus/ once fixed. Needs clang-14 and libclang-rt-14-dev
# (scripts/bootstrap.sh installs both). Prints libFuzzer's final stats (execs, coverage).
# FUZZ_SEED (libFuzzer -seed; default 0: a new seed each run) and FUZZ_RUNS (-runs; default
# unlimited, stop at SECONDS) make a run repeatable: CI uses a fixed seed and run count, so
# it replays the same inputs every time (a regression check that passes or fails the same
# way on every run); exploring for new findings is a run without them.
set -euo pipefail
SECONDS_TO_RUN="${1:-60}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEVICE="${TENSOR_FUZZ_DEVICE:-cpu}"
if [[ $DEVICE == vulkan* ]]; then
  FUZZ_BUILD_DIR="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz-vulkan}"
  VULKAN=enabled
else
  FUZZ_BUILD_DIR="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
  VULKAN=disabled
fi
WORK_DIR="${WORK_DIR:-$FUZZ_BUILD_DIR/fuzz}"
CXX="${FUZZ_CXX:-clang++-14}"
JOBS="${JOBS:-$(nproc)}"
command -v "$CXX" >/dev/null || { echo "fuzz.sh: $CXX not found (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }

t0=$EPOCHREALTIME
if [[ ! -f "$FUZZ_BUILD_DIR/build.ninja" ]]; then
  # -O1: several times faster to run under ASan than -O0. HWY_COMPILE_ONLY_STATIC:
  # Highway kernels for the baseline target only (not one copy per SIMD target), which
  # cuts the build to a fraction; the fuzzer exercises the library's logic, not each ISA.
  # No oneDNN (its sgemm needs OpenMP, off here): f32 products take the BLIS route.
  CXX="$CXX" meson setup "$FUZZ_BUILD_DIR" "$ROOT" --wrap-mode=nodownload -Dtests=false -Dtools=false \
    -Dopenmp=disabled -Donednn=disabled -Dvulkan="$VULKAN" -Db_sanitize=address,undefined -Db_lundef=false \
    -Doptimization=1 -Ddebug=true -Dcpp_args="-fsanitize=fuzzer-no-link -DHWY_COMPILE_ONLY_STATIC=1" >/dev/null
fi
meson compile -C "$FUZZ_BUILD_DIR" -j "$JOBS" tensor >/dev/null
mkdir -p "$WORK_DIR/corpus"
cp -n "$ROOT"/tests/fuzz/corpus/* "$WORK_DIR/corpus/" 2>/dev/null || true
"$CXX" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I "$ROOT/lib/include" -I "$FUZZ_BUILD_DIR/lib/include" \
  "$ROOT/tests/fuzz/decoder.cpp" "$ROOT/tests/fuzz/fuzz_target.cpp" "$ROOT/tests/fuzz/throwing_new.cpp" -o "$WORK_DIR/fuzz_target" \
  -L "$FUZZ_BUILD_DIR" -ltensor -Wl,-rpath,"$FUZZ_BUILD_DIR"
echo "fuzz.sh: library + target built in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s" \
  "($FUZZ_BUILD_DIR); fuzzing $DEVICE for $SECONDS_TO_RUN s"
cd "$WORK_DIR"
# allocator_may_return_null: hostile inputs ask for allocations no machine has; the
# library must refuse them with ExecutionError, which needs malloc to return null.
# -rss_limit_mb=0 also lifts libFuzzer's per-malloc limit (the same 2 GiB by default),
# which the refused requests (2^40 bytes and more) would trip before ASan returns null.
# UBSan findings abort (halt_on_error), so libFuzzer records the input. Leaks are
# findings too (LeakSanitizer after inputs that allocated more than they freed).
export TENSOR_FUZZ_DEVICE="$DEVICE"
rc=0
ASAN_OPTIONS="allocator_may_return_null=1:${ASAN_OPTIONS:-}" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}" \
LSAN_OPTIONS="suppressions=$ROOT/.ci/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}" \
  ./fuzz_target -max_total_time="$SECONDS_TO_RUN" -seed="${FUZZ_SEED:-0}" -runs="${FUZZ_RUNS:--1}" -max_len=512 -rss_limit_mb=0 -timeout=30 \
  -print_final_stats=1 corpus >fuzz.log 2>&1 || rc=$?
# The log without the per-input lines (NEW/REDUCE/pulse): start, findings, final stats.
grep -Ev '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)' fuzz.log | tail -n 80
echo "fuzz.sh: $(grep -c '^#[0-9]*[[:space:]]*NEW' fuzz.log || true) new inputs; corpus now $(ls corpus | wc -l) files; log $WORK_DIR/fuzz.log; exit $rc"
exit "$rc"
