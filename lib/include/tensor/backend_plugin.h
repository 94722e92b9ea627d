/* The C interface of a libtensor backend plugin (docs/plugins.md): what a shared object
 * libtensor-backend-<name>.so exports and the tables it hands the host. C only, included by no
 * other public header; a plugin compiles against it alone (pkg-config --cflags tensor-plugin)
 * and does not link libtensor.so: what it needs from the host arrives as TensorHostApi.
 *
 * Versioning: abi_major must equal the host's; members are only appended within a major, and
 * every table starts with its struct_size, so each side knows which members the other has.
 * Op codes (tensor/backend_plugin_ops.h, generated from the op table) are append-only: a plugin
 * built against an older, shorter op list stays valid on a newer host.
 *
 * Every optional member says what the host does when it is NULL. */
#ifndef TENSOR_BACKEND_PLUGIN_H
#define TENSOR_BACKEND_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/backend_plugin_ops.h"

#define TENSOR_PLUGIN_ABI_MAJOR 1
#define TENSOR_PLUGIN_ABI_MINOR 2
/* The most dims a tensor has (tensor::kMaxRank). */
#define TENSOR_PLUGIN_MAX_RANK 8

#if defined(__GNUC__) || defined(__clang__)
#define TENSOR_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TENSOR_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
#include <exception>
#include <new>
extern "C" {
#endif

/* What every entry returns. Anything but OK carries a message set with TensorHostApi::set_error
 * first; the host throws the matching tensor::Error with "[<plugin>:<op>]" before it. */
typedef int32_t TensorStatus;
enum {
  TENSOR_STATUS_OK = 0,
  TENSOR_STATUS_SHAPE = 1,         /* tensor::ShapeError */
  TENSOR_STATUS_DTYPE = 2,         /* tensor::DTypeError */
  TENSOR_STATUS_DEVICE = 3,        /* tensor::DeviceError */
  TENSOR_STATUS_EXECUTION = 4,     /* tensor::ExecutionError */
  TENSOR_STATUS_INDEX = 5,         /* tensor::IndexError */
  TENSOR_STATUS_UNSUPPORTED = 6,   /* tensor::NotImplemented */
  TENSOR_STATUS_OUT_OF_MEMORY = 7  /* tensor::ExecutionError ("out of memory") */
};

/* dtypes: fixed values, append-only (tensor::DType's order; QFloat does not cross). */
enum TensorDTypeCode {
  TENSOR_DTYPE_F64 = 0, TENSOR_DTYPE_F32 = 1, TENSOR_DTYPE_F16 = 2, TENSOR_DTYPE_BF16 = 3,
  TENSOR_DTYPE_I64 = 4, TENSOR_DTYPE_I32 = 5, TENSOR_DTYPE_I16 = 6, TENSOR_DTYPE_I8 = 7,
  TENSOR_DTYPE_U64 = 8, TENSOR_DTYPE_U32 = 9, TENSOR_DTYPE_U16 = 10, TENSOR_DTYPE_U8 = 11,
  TENSOR_DTYPE_BOOL = 12, TENSOR_DTYPE_BOOL_U8 = 13, TENSOR_DTYPE_BOOL_U32 = 14,
  TENSOR_DTYPE_COUNT = 15
};
/* A bit of an op_dtypes mask. */
#define TENSOR_DTYPE_BIT(d) (1u << (d))

/* dtype_usage flags (tensor::DTypeUsage). */
enum { TENSOR_USAGE_STORAGE = 1, TENSOR_USAGE_ARITHMETIC = 2, TENSOR_USAGE_ACCELERATED = 4 };

/* A plugin's tensor: opaque to the host, counted by the plugin (retain / release). */
typedef struct TensorPrimitive_ *TensorPrim;

/* dtype and shape of a tensor; a plugin's tensors are dense row-major as far as the host sees. */
typedef struct TensorMeta {
  int32_t dtype; /* TensorDTypeCode */
  uint32_t rank;
  int64_t shape[TENSOR_PLUGIN_MAX_RANK];
} TensorMeta;

/* A scalar argument: which member holds it. */
enum { TENSOR_SCALAR_FLOAT = 0, TENSOR_SCALAR_INT = 1, TENSOR_SCALAR_UINT = 2, TENSOR_SCALAR_BOOL = 3 };
typedef struct TensorScalar {
  int32_t kind;
  double f;
  int64_t i; /* INT and BOOL (0 or 1) */
  uint64_t u;
} TensorScalar;

/* One op call. The host has validated everything (kinds, shapes, dtypes, dims): the entry trusts
 * it. Which members are set depends on the op's family (docs/plugins.md):
 *   Unary, Reduce      inputs[0]
 *   Binary             inputs[0], inputs[1] (broadcast by shape: out.shape is the broadcast)
 *   Scalar             inputs[0], scalar
 *   Dim                inputs[0], dim
 *   Create             out only (empty, zeros, ones)
 *   Full               out, scalar
 *   Matmul             inputs[0], inputs[1] (batch dims broadcast)
 *   Reshape            inputs[0] (out.shape is the target: reshape, expand)
 * ABI 1.2: every other family with a tensor input (layout, indexing, sort, cast, compare,
 * module ops, the collectives: all_reduce's args = [ReduceOp], see dist_all_reduce below),
 * called only when the plugin's abi_minor >= 2; the exception is the QFloat rows (quantized
 * tensors do not cross).
 * Its members follow the op's C++ signature (docs/plugins.md lists every family):
 *   inputs             every tensor argument in order (a list, as cat's, is expanded in
 *                      place); a NULL input is an absent optional tensor (a bias, a mask)
 *   scalar, scalar2    the first and second Scalar or floating (eps) argument
 *   args               every other argument in order, as int64: a dim, count, flag or enum as
 *                      one value (a dtype as its TensorDTypeCode); a shape or an axis list as
 *                      its length, then the values; slices as their count, then (start, step,
 *                      len) per dim; convolution options as rank, stride[3], padding[3],
 *                      dilation[3], padding_out[3], groups; pool options as rank, kernel[3],
 *                      stride[3], padding[3], dilation[3], output_size[3], ceil_mode,
 *                      count_include_pad
 *   out                dtype -1: the entry decides the result's dtype and shape (the host
 *                      reads them with prim.metadata)
 *   result2            the second result of a two-result op (values then indices) */
typedef struct TensorOpCall {
  uint32_t struct_size;
  uint32_t op;     /* a TensorOpCode */
  uint32_t device; /* the device index */
  uint32_t input_count;
  const TensorPrim *inputs;    /* borrowed for the call */
  const uint8_t *input_unique; /* 1: the host holds the only reference to inputs[i], so the entry
                                  may write into it and return it (retained) as the result */
  TensorMeta out;              /* the result's dtype and shape (the host's shape rule) */
  TensorScalar scalar;
  int64_t dim;
  TensorPrim result; /* set by the entry: a new reference the host releases */
  /* ABI 1.2 (a plugin reads them only from entries the host calls under 1.2: see above). */
  TensorScalar scalar2;
  const int64_t *args; /* borrowed for the call */
  uint32_t arg_count;
  TensorPrim result2; /* set by the entry of a two-result op: a new reference */
} TensorOpCall;

typedef TensorStatus (*TensorOpFn)(TensorOpCall *call);

enum { TENSOR_DEVICE_KIND_CPU = 0, TENSOR_DEVICE_KIND_GPU = 1, TENSOR_DEVICE_KIND_IGPU = 2, TENSOR_DEVICE_KIND_ACCEL = 3 };
typedef struct TensorDeviceInfo {
  uint32_t struct_size;
  int32_t kind;
  const char *name;        /* short, e.g. "ref cpu" (the plugin keeps the string alive) */
  const char *description; /* may be NULL */
  uint64_t memory_total;   /* bytes; 0: unknown */
  uint64_t memory_free;
  const char *pci_bus_id;  /* or NULL */
} TensorDeviceInfo;

typedef struct TensorDefaultSettings {
  int32_t float_dtype; /* a float TensorDTypeCode */
  int32_t int_dtype;   /* an int TensorDTypeCode */
  int32_t bool_dtype;  /* TENSOR_DTYPE_BOOL, _BOOL_U8 or _BOOL_U32 */
} TensorDefaultSettings;

typedef struct TensorMemoryStats {
  uint64_t bytes_in_use, bytes_reserved, peak_bytes_in_use;
} TensorMemoryStats;

/* Device-level rows. */
typedef struct TensorDeviceRows {
  uint32_t struct_size;
  /* Required: what device `device` is. */
  TensorStatus (*device_info)(uint32_t device, TensorDeviceInfo *out);
  /* Required: TENSOR_USAGE_* flags of a dtype on the device. */
  uint32_t (*dtype_usage)(uint32_t device, int32_t dtype);
  /* Required: a new tensor from dense row-major host bytes (meta's dtype and shape). */
  TensorStatus (*from_host)(uint32_t device, const TensorMeta *meta, const void *bytes, TensorPrim *out);
  /* Required: the tensor's elements, dense row-major, into `bytes` (`size` bytes). */
  TensorStatus (*to_host)(TensorPrim p, void *bytes, size_t size);
  /* NULL: F32, I32, BOOL. */
  TensorStatus (*default_settings)(uint32_t device, TensorDefaultSettings *out);
  /* NULL: nothing is queued (no-op). */
  TensorStatus (*sync)(uint32_t device);
  /* NULL: no-op. */
  TensorStatus (*flush)(uint32_t device);
  /* NULL: the seed goes to the host's generator (random ops run through the host then). */
  TensorStatus (*seed)(uint32_t device, uint64_t seed);
  /* NULL: all zeros. */
  TensorStatus (*memory_stats)(uint32_t device, TensorMemoryStats *out);
  /* NULL: no-op. */
  TensorStatus (*memory_cleanup)(uint32_t device);
} TensorDeviceRows;

/* Primitive rows: all required except can_mut. */
typedef struct TensorPrimRows {
  uint32_t struct_size;
  void (*retain)(TensorPrim p);
  void (*release)(TensorPrim p);
  TensorStatus (*metadata)(TensorPrim p, TensorMeta *out);
  /* NULL: the plugin keeps no reference of its own, so the host's uniqueness decides. */
  int32_t (*can_mut)(TensorPrim p);
} TensorPrimRows;

/* A {key, value} string pair printed by tensorctl info; the array ends with a NULL key. */
typedef struct TensorFeature {
  const char *key;
  const char *value;
} TensorFeature;

/* What tensor_plugin_init hands the host (static storage of the plugin: the host reads it for
 * the life of the process). */
typedef struct TensorPluginInfo {
  uint32_t struct_size; /* sizeof(TensorPluginInfo) */
  uint16_t abi_major;   /* TENSOR_PLUGIN_ABI_MAJOR */
  uint16_t abi_minor;   /* TENSOR_PLUGIN_ABI_MINOR */
  const char *name;     /* [a-z0-9_]+, not a built-in backend's name: devices are <name>:N */
  const char *version;
  const char *vendor;
  uint32_t op_count;          /* TENSOR_PLUGIN_OP_COUNT */
  uint64_t op_table_hash;     /* TENSOR_PLUGIN_OP_TABLE_HASH */
  const char *const *op_names; /* [op_count] "name:Family:arity" (TENSOR_PLUGIN_OP_LIST), or NULL;
                                  reports the first differing op when the hash differs */
  const TensorOpFn *ops;      /* [op_count]; NULL entry: the host's default (a composition of
                                 other ops, or the host CPU kernel through to_host/from_host) */
  const uint32_t *op_dtypes;  /* [op_count] TENSOR_DTYPE_BIT masks: the dtypes an entry computes
                                 (others take the host's default); NULL: every dtype */
  uint32_t device_count;      /* >= 1 */
  TensorDeviceRows device;
  TensorPrimRows prim;
  const TensorFeature *features; /* or NULL */
  /* ABI 1.1 (a 1.0 plugin's struct ends above; the host reads it as NULL). Writes src's elements
   * into dst's own buffer (same dtype and shape, both of this plugin): dst stays the same
   * TensorPrim, and every holder of it sees the new values. Graphs (tensor::capture) need it: a
   * replay writes each step's results into the buffers the capture returned. NULL: capture and
   * copy_from on the device throw NotImplemented. */
  TensorStatus (*assign)(TensorPrim dst, TensorPrim src);
} TensorPluginInfo;

/* What the host offers a plugin. */
typedef struct TensorHostApi {
  uint32_t struct_size;
  uint16_t abi_major;
  uint16_t abi_minor;
  /* Records the message of a failing status for this thread; returns `code`. */
  TensorStatus (*set_error)(TensorStatus code, const char *message);
  /* A line for the host's log (stderr with TENSOR_PLUGIN_LOG=1). level: 0 info, 1 warning. */
  void (*log)(int32_t level, const char *message);
  /* ABI 1.2 (check struct_size before use): the host's process group (tensor::dist; rank 0 of
   * 1 without mpirun; a LocalGroup rank on its threads). */
  int32_t (*dist_rank)(void);
  int32_t (*dist_world)(void);
  /* all_reduce across the group of `meta`'s elements (F64, F32 or an integer dtype) read from
   * host-visible `src` and written to `dst` (may equal src): op 0 Sum, 1 Mean, 2 Max, 3 Min
   * (tensor::dist::ReduceOp). The host's communicator runs it where the bytes lie, with its
   * sequence numbers, TENSOR_DIST_CHECK and watchdog; a failure sets the message and returns
   * its status. For the all_reduce entry of a plugin whose tensors live in host memory. */
  TensorStatus (*dist_all_reduce)(const TensorMeta *meta, const void *src, void *dst, int32_t op);
} TensorHostApi;

/* Entry points (the only symbols a plugin exports). */
typedef int32_t (*TensorPluginScoreFn)(void);
typedef TensorStatus (*TensorPluginInitFn)(const TensorHostApi *host, const TensorPluginInfo **out);
#define TENSOR_PLUGIN_SCORE_SYMBOL "tensor_plugin_score"
#define TENSOR_PLUGIN_INIT_SYMBOL "tensor_plugin_init"

/* Optional: > 0 when the plugin can run on this machine (bigger is better); 0 rejects it. Keep it
 * and every static initialiser baseline-ISA: they run before anything can refuse the plugin. */
TENSOR_PLUGIN_EXPORT int32_t tensor_plugin_score(void);
/* Required: points *out at the plugin's tables; may keep `host` for the life of the process. */
TENSOR_PLUGIN_EXPORT TensorStatus tensor_plugin_init(const TensorHostApi *host, const TensorPluginInfo **out);

#ifdef __cplusplus
} /* extern "C" */

/* Wraps the body of a C++ entry: an exception never crosses into the host, it becomes a status
 * with its message (bad_alloc: OUT_OF_MEMORY). `host` is the TensorHostApi the plugin kept. */
#define TENSOR_PLUGIN_GUARD(host, ...)                                                 \
  try {                                                                                \
    __VA_ARGS__                                                                        \
  } catch (const std::bad_alloc &) {                                                   \
    return (host)->set_error(TENSOR_STATUS_OUT_OF_MEMORY, "out of memory");            \
  } catch (const std::exception &tensor_plugin_e_) {                                   \
    return (host)->set_error(TENSOR_STATUS_EXECUTION, tensor_plugin_e_.what());        \
  } catch (...) {                                                                      \
    return (host)->set_error(TENSOR_STATUS_EXECUTION, "unknown exception");            \
  }
#endif

#endif /* TENSOR_BACKEND_PLUGIN_H */
