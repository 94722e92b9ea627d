#!/bin/sh
# Training through a backend plugin (issue 31's "done when"): tensorctl train, the MLP on the
# UCI digits with autodiff and Adam, on the reference plugin's device ref:0 (TENSOR_BACKEND_PATH
# set by the caller) and on the built-in cpu. The plugin's scalar kernels may round otherwise
# than the cpu's SIMD ones, so the accuracies must agree within 2 of the 359 test images
# (0.6 points), and the run must have learned (>= 70 %; chance is 10 %). Exit 77 (skipped)
# without the digits cache (scripts/bootstrap.sh).
# usage: train_plugin_test.sh TENSORCTL SOURCE_ROOT
tensorctl=$1 root=$2
[ -f "$root/.cache/digits/digits.csv.gz" ] || exit 77
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
args="train --dataset digits --model mlp --epochs 3 --batch 64 --lr 0.003"
ref=$(TENSOR_DEVICE=ref:0 "$tensorctl" $args --out "$d/ref") || { echo "$ref"; exit 1; }
cpu=$(TENSOR_DEVICE=cpu "$tensorctl" $args --out "$d/cpu") || { echo "$cpu"; exit 1; }
echo "$ref" | grep -v ETA
echo "$cpu" | grep -v ETA
echo "$ref" | grep -q '^train: mlp .* ref:0, Adam' || { echo "expected the run on ref:0"; exit 1; }
[ -f "$d/ref/checkpoint.safetensors" ] || { echo "no checkpoint from the run on ref:0"; exit 1; }
acc() { echo "$1" | awk '/^test accuracy:/ { v = $3; sub("%", "", v); print v }'; }
x=$(acc "$ref") y=$(acc "$cpu")
echo "test accuracy: ref:0 $x%, cpu $y%"
awk -v x="$x" -v y="$y" 'BEGIN { if (x !~ /^[0-9.]+$/ || y !~ /^[0-9.]+$/) exit 1; d = x - y; exit (d > 0.6 || d < -0.6 || x < 70) }' ||
  { echo "expected accuracies within 0.6 points and ref:0 >= 70 %; got $x% and $y%"; exit 1; }
