#!/bin/sh
# Data-parallel tensorctl train, issue 27's acceptance run (the slow suite): the default model
# (the CNN) on Fashion-MNIST, 2048 training images = 16 full global batches of 128 (the
# issue's run), then 2101 = those and a last batch of 53 (as the full set's 60,000 end in one
# of 96), by `mpirun -np 2` (64 images per process and step, 27 and 26 in the last) and by one
# process with the same global batch, each scored on the 10,000 test images. Rank 0 alone
# reports and writes one checkpoint; the two models differ by float summation order only (the all_reduce sums the
# two halves of each batch's gradient), so the test accuracies agree within 0.3 points
# (30 images). Prints both runs' figures last. Exit 77 (skipped) without the Fashion-MNIST
# cache (scripts/bootstrap.sh).
# usage: train_mpi_slow_test.sh MPIRUN TENSORCTL SOURCE_ROOT [mpirun transport args...]
mpirun=$1 tensorctl=$2 root=$3
shift 3
data="$root/.cache/fashion-mnist"
[ -f "$data/train-images-idx3-ubyte.gz" ] || exit 77
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
acc() { echo "$1" | awk '/^test accuracy:/ { v = $3; sub("%", "", v); print v }'; }
epoch() { echo "$1" | grep '^epoch 1/1:'; }
for limit in 2048 2101; do
  args="train --data $data --epochs 1 --limit $limit --batch 128"
  rm -rf "$d/one" "$d/two"
  one=$("$tensorctl" $args --out "$d/one") || { echo "$one"; exit 1; }
  two=$("$mpirun" -np 2 --oversubscribe "$@" "$tensorctl" $args --out "$d/two") || { echo "$two"; exit 1; }
  echo "$one"
  echo "$two"
  [ "$(echo "$two" | grep -c '^test accuracy:')" = 1 ] || { echo "expected one accuracy line from the two processes"; exit 1; }
  [ -f "$d/two/checkpoint.safetensors" ] || { echo "no checkpoint from the two processes"; exit 1; }
  x=$(acc "$one") y=$(acc "$two")
  echo "--limit $limit, 1 process, batch 128:            $(epoch "$one")"
  echo "--limit $limit, 2 processes x 64 (mpirun -np 2): $(epoch "$two")"
  echo "--limit $limit: test accuracy 1 process $x%, 2 processes $y%"
  awk -v x="$x" -v y="$y" 'BEGIN { if (x !~ /^[0-9.]+$/ || y !~ /^[0-9.]+$/) exit 1; d = x - y; exit (d > 0.3 || d < -0.3) }' ||
    { echo "expected accuracies within 0.3 points; got $x% and $y%"; exit 1; }
done
