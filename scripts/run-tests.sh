#!/usr/bin/env bash
# Builds libtensor and runs its test suite (meson test), printing meson's summary
# (Ok: / Fail: ...). Exit status is meson test's.
#
# Env: BUILD_DIR (default build); MESON_ARGS (extra `meson setup` args, used only when
# BUILD_DIR is not configured yet, e.g. "-Db_sanitize=address,undefined");
# TEST_ARGS (extra `meson test` args, e.g. "--suite cpu"); JOBS (build jobs, default:
# number of cores); SKIP_BOOTSTRAP=1 to skip package installation.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"

[[ "${SKIP_BOOTSTRAP:-0}" == 1 ]] || bash scripts/bootstrap.sh

if [[ -f "$BUILD_DIR/meson-private/coredata.dat" ]]; then
  echo "run-tests: reusing configured build dir $BUILD_DIR"
else
  # shellcheck disable=SC2086  # MESON_ARGS is a list of words on purpose
  meson setup "$BUILD_DIR" --wrap-mode=nodownload ${MESON_ARGS:-}
fi
meson compile -C "$BUILD_DIR" -j "$JOBS"
# shellcheck disable=SC2086
meson test -C "$BUILD_DIR" --print-errorlogs ${TEST_ARGS:-}
