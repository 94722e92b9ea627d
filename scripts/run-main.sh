#!/usr/bin/env bash
# The main job from a fresh Debian 12 checkout: install packages, configure (release) and
# build only what it runs (tensorctl and the basic example; the test binaries are
# run-tests.sh's), then show what libtensor sees on this machine, run the example and the digits
# demo, and run the main job: `tensorctl train --model cnn --dataset fashion` trains the
# issue-15 CNN on Fashion-MNIST with autodiff and Adam (tools/train/), one epoch by default
# (about 2 minutes on 2 cores; EPOCHS=5 reaches the issue's accuracy target), and writes
# its checkpoint and training curve to TRAIN_OUT (default train-out/), then reloads the
# checkpoint with `tensorctl eval`.
#
# Env: BUILD_DIR (default build), MESON_ARGS (extra `meson setup` args for a new build
# dir), JOBS (parallel build jobs, default: number of cores), SKIP_BOOTSTRAP=1.
# EPOCHS (default 1), TRAIN_OUT (default train-out).
# TENSOR_DEVICE picks the device the demo and the training run on (cpu, vulkan, vulkan:N).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/build-tree.sh
source scripts/build-tree.sh
BUILD_TARGETS=(tools/tensorctl tools/examples/basic)
build_tree run-main -Dbuildtype=release

echo
echo "== $BUILD_DIR/tools/tensorctl info"
"$BUILD_DIR/tools/tensorctl" info
echo
echo "== $BUILD_DIR/tools/examples/basic"
"$BUILD_DIR/tools/examples/basic"
echo
echo "== $BUILD_DIR/tools/tensorctl demo   (the quick one: the digits classifier on ${TENSOR_DEVICE:-cpu})"
"$BUILD_DIR/tools/tensorctl" demo --quiet
echo
EPOCHS=${EPOCHS:-1}
TRAIN_OUT=${TRAIN_OUT:-train-out}
echo "== $BUILD_DIR/tools/tensorctl train --model cnn --dataset fashion --epochs $EPOCHS --out $TRAIN_OUT"
echo "   (the main job: the CNN on Fashion-MNIST with autodiff and Adam on ${TENSOR_DEVICE:-cpu})"
"$BUILD_DIR/tools/tensorctl" train --model cnn --dataset fashion --epochs "$EPOCHS" --out "$TRAIN_OUT"
echo
echo "== $BUILD_DIR/tools/tensorctl eval --weights $TRAIN_OUT/checkpoint.safetensors"
"$BUILD_DIR/tools/tensorctl" eval --weights "$TRAIN_OUT/checkpoint.safetensors"
