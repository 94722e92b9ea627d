// <blis.h> with the warnings it triggers under -Werror silenced (one place for the pragmas).
#pragma once

#if TENSOR_HAVE_BLIS
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wtype-limits"
#include <blis.h>
#pragma GCC diagnostic pop
#endif
