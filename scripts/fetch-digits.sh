#!/usr/bin/env bash
# Puts the UCI digits CSV (shipped by Debian's python3-sklearn) at
# .cache/digits/digits.csv.gz without installing the package or its dependencies:
# apt-get download + dpkg -x into a project cache. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.cache/digits/digits.csv.gz"
[ -s "$dest" ] && { echo "digits data: $dest"; exit 0; }
mkdir -p "$root/.cache/digits"
src=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
if [ -s "$src" ]; then
  cp "$src" "$dest"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && { apt-get download python3-sklearn >/dev/null 2>&1 || { apt-get update -qq && apt-get download python3-sklearn >/dev/null; }; })
  dpkg -x "$work"/python3-sklearn_*.deb "$work/x"
  cp "$work/x$src" "$dest"
fi
echo "digits data: $dest ($(zcat "$dest" | wc -l) rows)"
