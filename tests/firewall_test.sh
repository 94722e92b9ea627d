#!/bin/sh
# Compile firewall (SPEC §6): a user TU that includes only <tensor/tensor.hpp> must
# reference no Highway, BLIS, fmt, Vulkan, dispatch or backend symbol.
# usage: firewall_test.sh CXX SRC_INCLUDE BUILD_INCLUDE USER_CPP OUT_DIR
set -eu
cxx=$1; src_inc=$2; build_inc=$3; user=$4; out=$5
mkdir -p "$out"
obj="$out/firewall_user.o"
"$cxx" -std=c++20 -O2 -c "$user" -I "$src_inc" -I "$build_inc" -o "$obj"
undef=$(nm -u "$obj" | c++filt)
echo "$undef" > "$out/firewall_undefined.txt"
status=0
# Sanity: the object does call into libtensor (otherwise the test proves nothing).
if ! echo "$undef" | grep -Eq 'tensor::(detail::matmul|Tensor<.*>::matmul)'; then
  echo "FAIL: no reference to matmul in libtensor; did the user code compile to nothing?"; status=1
fi
bad=$(echo "$undef" | grep -E 'hwy::|bli_|fmt::|(^|[^A-Za-z_])vk[A-Z]|tensor::dispatch|tensor::cpu|tensor::vulkan' || true)
if [ -n "$bad" ]; then
  echo "FAIL: the user object references implementation symbols:"; echo "$bad"; status=1
fi
[ $status -eq 0 ] && echo "ok: $(echo "$undef" | wc -l) undefined symbols, none from dispatch/backends/Highway/BLIS/fmt/Vulkan"
exit $status
