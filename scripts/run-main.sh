#!/usr/bin/env bash
# The main job from a fresh Debian 12 checkout: install packages, configure and build
# (release), then show what libtensor sees on this machine, run the example, and run the
# main job: `tensorctl demo` trains the digits classifier (tools/demo/digits.cpp).
#
# Env: BUILD_DIR (default build), MESON_ARGS (extra `meson setup` args for a new build
# dir), JOBS (parallel build jobs, default: number of cores), SKIP_BOOTSTRAP=1.
# TENSOR_DEVICE picks the device the demo trains on (cpu, vulkan, vulkan:N).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"

[[ "${SKIP_BOOTSTRAP:-0}" == 1 ]] || bash scripts/bootstrap.sh

if [[ -f "$BUILD_DIR/meson-private/coredata.dat" ]]; then
  echo "run-main: reusing configured build dir $BUILD_DIR"
else
  # shellcheck disable=SC2086  # MESON_ARGS is a list of words on purpose
  meson setup "$BUILD_DIR" --wrap-mode=nodownload -Dbuildtype=release ${MESON_ARGS:-}
fi
meson compile -C "$BUILD_DIR" -j "$JOBS"

echo
echo "== $BUILD_DIR/tools/tensorctl info"
"$BUILD_DIR/tools/tensorctl" info
echo
echo "== $BUILD_DIR/tools/examples/basic"
"$BUILD_DIR/tools/examples/basic"
echo
echo "== $BUILD_DIR/tools/tensorctl demo   (the main job: train the digits classifier on ${TENSOR_DEVICE:-cpu})"
"$BUILD_DIR/tools/tensorctl" demo
