#!/bin/sh
# tensor/backend_plugin.h is C: it compiles as C11 with every warning an error, on its own
# (with the generated op list) and with TENSOR_PLUGIN_GUARD as C++17.
# usage: plugin_header_test.sh CC CXX SRC_INCLUDE BUILD_INCLUDE WORKDIR
set -eu
cc=$1; cxx=$2; src=$3; bld=$4; dir=$5
mkdir -p "$dir"
printf '#include <tensor/backend_plugin.h>\nint main(void) { TensorPluginInfo i = {0}; (void)i; return TENSOR_OP_add == 55 ? 0 : 1; }\n' > "$dir/c.c"
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic -I"$src" -I"$bld" -fsyntax-only "$dir/c.c"
printf '#include <tensor/backend_plugin.h>\nstatic const TensorHostApi* h;\nTensorStatus f() { TENSOR_PLUGIN_GUARD(h, { return TENSOR_STATUS_OK; }) }\n' > "$dir/cxx.cpp"
"$cxx" -std=c++17 -Wall -Wextra -Werror -pedantic -I"$src" -I"$bld" -fsyntax-only "$dir/cxx.cpp"
echo "ok: backend_plugin.h compiles as C11 and C++17"
