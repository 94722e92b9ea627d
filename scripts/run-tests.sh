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

# shellcheck source=scripts/build-tree.sh
source scripts/build-tree.sh
build_tree run-tests
# shellcheck disable=SC2086
meson test -C "$BUILD_DIR" --print-errorlogs ${TEST_ARGS:-}
