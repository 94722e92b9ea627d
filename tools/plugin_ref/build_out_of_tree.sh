#!/bin/sh
# Builds the reference plugin outside the tree, against an installed libtensor, with nothing but
# `pkg-config --cflags tensor-plugin` (docs/plugins.md); CI then loads it by TENSOR_BACKEND_PATH.
# usage: build_out_of_tree.sh PREFIX OUTDIR   (PREFIX: where `meson install` put libtensor)
set -eu
prefix=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
pcdir=$(find "$prefix" -name tensor-plugin.pc -printf '%h\n' | head -n 1)
[ -n "$pcdir" ] || { echo "no tensor-plugin.pc under $prefix" >&2; exit 1; }
cflags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$prefix" --cflags tensor-plugin)
mkdir -p "$out"
${CXX:-c++} -std=c++17 -O2 -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden -Wall -Wextra -Werror \
  $cflags "$here/ref_plugin.cpp" -o "$out/libtensor-backend-ref.so" \
  -Wl,--version-script="$here/plugin.map" -Wl,--exclude-libs,ALL -Wl,-z,defs
echo "$out/libtensor-backend-ref.so"
