#!/bin/sh
# libtensor.so exports only tensor:: names (STYLE.md: nm -D shows only tensor:: names).
# Judged on the mangled names, as .ci/run's install check does: a demangled template
# function starts with its return type, so "tensor::X* std::f<...>" must not pass.
# usage: exports_test.sh LIBTENSOR_SO
set -eu
lib=$1
mangled=$(nm -D --defined-only "$lib" | awk '{ print $NF }')
[ -n "$mangled" ] || { echo "FAIL: no exported symbols in $lib"; exit 1; }
bad=$(echo "$mangled" | grep -Ev '^_Z(T[ISV])?N[rVKOR]*6tensor' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib exports symbols outside tensor::"; echo "$bad" | c++filt | head -50; exit 1
fi
syms=$(echo "$mangled" | c++filt)
for want in 'tensor::detail::matmul' 'tensor::Device::default_device'; do
  echo "$syms" | grep -q "$want" || { echo "FAIL: $want is not exported"; exit 1; }
done
echo "ok: $(echo "$syms" | wc -l) exported symbols, all tensor::"
