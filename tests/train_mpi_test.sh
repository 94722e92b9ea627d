#!/bin/sh
# Data-parallel tensorctl train (the mpi suite): the MLP on the UCI digits, 1024 images (32
# full global batches of 32, so both runs take the same steps), by 2 processes x 16 images
# and by 1 process x 32. Rank 0 alone reports (one accuracy line) and writes one checkpoint;
# the test accuracies may differ by float summation order only: within 2 of the 359 test
# images (0.6 points). Exit 77 (skipped) without the digits cache (scripts/bootstrap.sh).
# usage: train_mpi_test.sh MPIRUN TENSORCTL SOURCE_ROOT [mpirun transport args...]
mpirun=$1 tensorctl=$2 root=$3
shift 3
[ -f "$root/.cache/digits/digits.csv.gz" ] || exit 77
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
one=$("$tensorctl" train --dataset digits --model mlp --epochs 1 --limit 1024 --batch 32 --out "$d/one") || { echo "$one"; exit 1; }
two=$("$mpirun" -np 2 --oversubscribe --bind-to none "$@" "$tensorctl" \
      train --dataset digits --model mlp --epochs 1 --limit 1024 --batch 32 --out "$d/two") || { echo "$two"; exit 1; }
echo "$one"
echo "$two"
[ "$(echo "$two" | grep -c '^test accuracy:')" = 1 ] || { echo "expected one accuracy line from the two processes"; exit 1; }
[ -f "$d/two/checkpoint.safetensors" ] || { echo "no checkpoint from the two processes"; exit 1; }
acc() { echo "$1" | awk '/^test accuracy:/ { v = $3; sub("%", "", v); print v }'; }
x=$(acc "$one") y=$(acc "$two")
echo "test accuracy: 1 process $x%, 2 processes $y%"
awk -v x="$x" -v y="$y" 'BEGIN { if (x !~ /^[0-9.]+$/ || y !~ /^[0-9.]+$/) exit 1; d = x - y; exit (d > 0.6 || d < -0.6) }' ||
  { echo "expected accuracies within 0.6 points; got $x% and $y%"; exit 1; }
