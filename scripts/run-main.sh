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

# shellcheck source=scripts/build-tree.sh
source scripts/build-tree.sh
build_tree run-main -Dbuildtype=release

echo
echo "== $BUILD_DIR/tools/tensorctl info"
"$BUILD_DIR/tools/tensorctl" info
echo
echo "== $BUILD_DIR/tools/examples/basic"
"$BUILD_DIR/tools/examples/basic"
echo
echo "== $BUILD_DIR/tools/tensorctl demo   (the main job: train the digits classifier on ${TENSOR_DEVICE:-cpu})"
"$BUILD_DIR/tools/tensorctl" demo
