// Symbol visibility: only what is marked TENSOR_API leaves libtensor.so.
#pragma once

#if defined(TENSOR_BUILDING_LIBRARY)
#define TENSOR_API __attribute__((visibility("default")))
#else
#define TENSOR_API
#endif
