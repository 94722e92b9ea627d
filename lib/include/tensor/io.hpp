// Tensors on disk: .safetensors (named tensors plus string metadata) and .npy (one array),
// on host TensorData so saving and loading is device-independent (move to a device with
// Tensor::from_data, back with into_data).
//
// Loading validates the whole header against the file's size before allocating anything: a
// truncated file, a header length or data offsets beyond the file, overlapping, gapped or
// reversed offsets, an unknown dtype, a shape whose byte count does not match its offsets or
// exceeds 2^63 - 1, a repeated tensor name or header key, JSON nested deeper than 64 levels,
// or bad JSON throws FormatError (message names the path and the tensor), and nothing is
// half-loaded; data larger than the host's RAM + swap, or an allocation that fails, is an
// ExecutionError. Every message starts with the function called ([load_npy], ...). Saving
// writes `path.tmp` and renames it over `path`, so a failed save leaves no partial file.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/data.hpp"
#include "tensor/error.hpp"
#include "tensor/export.hpp"

namespace tensor {

/// A file that cannot be opened, read or written, or whose contents break its format.
class TENSOR_API FormatError : public Error {
 public:
  /// An error about the file at `path`; `message` is what() ("[load_npy] ...").
  FormatError(std::string path, const std::string& message) : Error(message), path_(std::move(path)) {}
  ~FormatError() override;
  /// The file the error is about.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Reading and writing .safetensors and .npy files of host TensorData (device-independent:
/// Tensor::from_data and into_data move them to and from a device). Bad files are FormatErrors.
namespace io {

/// Named tensors in order (the contents of a .safetensors file).
using NamedTensors = std::vector<std::pair<std::string, TensorData>>;

/// A loaded .safetensors file: tensors in the order of their data in the file (which is
/// the order save_safetensors wrote them in), and the __metadata__ strings.
struct TENSOR_API SafetensorsFile {
  /// The tensors by name, in file order, each in its stored dtype (BOOL loads as DType::Bool).
  NamedTensors tensors;
  /// The "__metadata__" strings (empty when the file has none).
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`; throws IndexError naming it when there is none.
  const TensorData& at(const std::string& name) const;
  /// True when a tensor is called `name`.
  bool contains(const std::string& name) const;
};

/// Writes `tensors` in the given order: an 8-byte little-endian header length, a JSON header
/// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}} padded with
/// spaces to a multiple of 8 bytes, then the raw little-endian bytes back to back. Dtypes:
/// F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL (every bool storage is written as
/// one byte per element). A quantized tensor (QFloat) is written as its codes under its name
/// (I8, or U32 words for PackedU32), its scales under "<name>.qscales" and its scheme in the
/// metadata key "qscheme.<name>" (docs/quantization.md); load_safetensors joins them back byte
/// for byte. Duplicate or empty names, "__metadata__" as a name, a metadata key a quantized
/// tensor needs, and names or metadata that are not valid UTF-8 are FormatErrors.
TENSOR_API void save_safetensors(const std::string& path, const NamedTensors& tensors,
                                 const std::map<std::string, std::string>& metadata = {});
/// Reads a .safetensors file. The whole header is checked against the file's size first: a
/// truncated or malformed file, bad offsets, an unknown dtype or a repeated name is a FormatError
/// naming the path, and nothing is half-loaded; ExecutionError when the data cannot be allocated.
/// Quantized tensors saved by save_safetensors load as QFloat data (their codes, scales and
/// scheme are checked against each other first): every metadata key that starts with
/// "qscheme." is read as a quantized tensor's scheme.
TENSOR_API SafetensorsFile load_safetensors(const std::string& path);

/// .npy: format 1.0 (2.0 when the header needs more than 65535 bytes), little-endian,
/// C order. Bool is '|b1'; bf16 has no numpy dtype and is a DTypeError. Reading accepts
/// versions 1.0, 2.0 and 3.0; fortran_order True and big-endian data are FormatErrors.
TENSOR_API void save_npy(const std::string& path, const TensorData& data);
/// Reads a .npy file (versions 1.0 to 3.0) into TensorData of its dtype ('|b1' as Bool);
/// FormatError for a bad file, Fortran order or big-endian data.
TENSOR_API TensorData load_npy(const std::string& path);

}  // namespace io
}  // namespace tensor
