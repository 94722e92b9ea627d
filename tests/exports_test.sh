#!/bin/sh
# libtensor.so exports only tensor:: names (STYLE.md: nm -D shows only tensor:: names).
# usage: exports_test.sh LIBTENSOR_SO
set -eu
lib=$1
syms=$(nm -D --defined-only "$lib" | c++filt | sed -E 's/^[0-9a-fA-F]+ [A-Za-z] //')
[ -n "$syms" ] || { echo "FAIL: no exported symbols in $lib"; exit 1; }
bad=$(echo "$syms" | grep -vE '^(tensor::|typeinfo for tensor::|typeinfo name for tensor::|vtable for tensor::)' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib exports symbols outside tensor::"; echo "$bad" | head -50; exit 1
fi
for want in 'tensor::detail::matmul' 'tensor::Device::default_device'; do
  echo "$syms" | grep -q "$want" || { echo "FAIL: $want is not exported"; exit 1; }
done
echo "ok: $(echo "$syms" | wc -l) exported symbols, all tensor::"
