#!/bin/sh
# Data-parallel tensorctl train (the mpi suite): the MLP on the UCI digits, global batch 32, by
# 2 processes x 16 images and by 1 process x 32, with two training set sizes whose last batch
# is smaller: 1001 images (a tail of 9: the ranks hold 5 and 4, so each rank's mean gradient
# is weighted 10/9 and 8/9) and 1025 (a tail of 1: rank 1 holds none and steps at weight 0).
# Both worlds take the same 32 or 33 steps on the same batches. Rank 0 alone reports (one
# accuracy line) and writes one checkpoint; the test accuracies may differ by float
# summation order only: within 2 of the 359 test images (0.6 points). Exit 77 (skipped)
# without the digits cache (scripts/bootstrap.sh).
# usage: train_mpi_test.sh MPIRUN TENSORCTL SOURCE_ROOT [mpirun transport args...]
mpirun=$1 tensorctl=$2 root=$3
shift 3
[ -f "$root/.cache/digits/digits.csv.gz" ] || exit 77
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
acc() { echo "$1" | awk '/^test accuracy:/ { v = $3; sub("%", "", v); print v }'; }
loss() { echo "$1" | awk '/^epoch 1\/1:/ { v = $4; sub(",", "", v); print v }'; }
# The last progress figure "K/N  ... img/s" (a bar under mpirun's terminal, lines otherwise).
steps() { echo "$1" | grep -o '[0-9]*/[0-9]*  [0-9]* img/s' | tail -n 1 | cut -d ' ' -f 1; }
for limit in 1001 1025; do
  args="train --dataset digits --model mlp --epochs 1 --limit $limit --batch 32"
  one=$("$tensorctl" $args --out "$d/one") || { echo "$one"; exit 1; }
  rm -rf "$d/two"
  two=$("$mpirun" -np 2 --oversubscribe --bind-to none "$@" "$tensorctl" $args --out "$d/two") || { echo "$two"; exit 1; }
  echo "$one"
  echo "$two"
  [ "$(echo "$two" | grep -c '^test accuracy:')" = 1 ] || { echo "expected one accuracy line from the two processes"; exit 1; }
  [ -f "$d/two/checkpoint.safetensors" ] || { echo "no checkpoint from the two processes"; exit 1; }
  x=$(acc "$one") y=$(acc "$two")
  [ -n "$(steps "$one")" ] && [ "$(steps "$one")" = "$(steps "$two")" ] ||
    { echo "expected the same steps in both worlds; got $(steps "$one") and $(steps "$two")"; exit 1; }
  echo "--limit $limit: steps $(steps "$one"), test accuracy 1 process $x%, 2 processes $y%; loss $(loss "$one") and $(loss "$two")"
  awk -v x="$x" -v y="$y" 'BEGIN { if (x !~ /^[0-9.]+$/ || y !~ /^[0-9.]+$/) exit 1; d = x - y; exit (d > 0.6 || d < -0.6) }' ||
    { echo "expected accuracies within 0.6 points; got $x% and $y%"; exit 1; }
  # The mean training losses over the same batches agree to float order (they differed by a
  # whole dropped batch before the tail was kept).
  awk -v x="$(loss "$one")" -v y="$(loss "$two")" 'BEGIN { if (x !~ /^[0-9.]+$/ || y !~ /^[0-9.]+$/) exit 1; d = x - y; exit (d > 0.0005 || d < -0.0005) }' ||
    { echo "expected epoch losses within 0.0005; got $(loss "$one") and $(loss "$two")"; exit 1; }
done
