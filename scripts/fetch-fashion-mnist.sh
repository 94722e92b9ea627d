#!/usr/bin/env bash
# Puts Fashion-MNIST (Debian's dataset-fashion-mnist: 60,000 train and 10,000 test 28x28
# images as IDX gzip files) into .cache/fashion-mnist/ without installing the package:
# apt-get download + dpkg -x into a scratch directory, then the four files are copied.
# The paths inside the package (dpkg -c): ./usr/share/datasets/fashion-mnist/*.gz. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.cache/fashion-mnist"
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
have_all() {
  local f
  for f in "${files[@]}"; do [ -s "$1/$f" ] || return 1; done
}
if have_all "$dest"; then echo "fashion-mnist data: $dest"; exit 0; fi
mkdir -p "$dest"
src=/usr/share/datasets/fashion-mnist
if ! have_all "$src"; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && { apt-get download dataset-fashion-mnist >/dev/null 2>&1 ||
                   { apt-get update -qq && apt-get download dataset-fashion-mnist >/dev/null; }; })
  dpkg -x "$work"/dataset-fashion-mnist_*.deb "$work/x"
  src="$work/x/usr/share/datasets/fashion-mnist"
fi
for f in "${files[@]}"; do
  cp "$src/$f" "$dest/$f.part" && mv "$dest/$f.part" "$dest/$f"
done
echo "fashion-mnist data: $dest ($(du -sh "$dest" | cut -f1))"
