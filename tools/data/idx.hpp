// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or plain, read into host
// TensorData. Tools-level rather than in libtensor: it needs zlib, which the library does
// not depend on, and a data set loader is not part of the tensor runtime (burn keeps its
// datasets in a separate crate too). Public API only, so examples can link it.
//
// IDX: two zero bytes, a type byte (0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32,
// 0x0E f64), a rank byte, rank big-endian u32 dims, then the elements big-endian, C order.
#pragma once

#include <cstddef>
#include <limits>
#include <string>

#include <tensor/data.hpp>
#include <tensor/io.hpp>

namespace datasets {

// Reads an IDX file. With max_items, only the first max_items entries along dim 0 are read
// (the returned shape says how many); otherwise the whole file, and bytes after the data are
// an error. Errors are tensor::FormatError naming the file and the byte offset (in the
// decompressed stream) where the problem is.
tensor::TensorData read_idx(const std::string& path, std::size_t max_items = std::numeric_limits<std::size_t>::max());
// Only the header: the full shape the file declares.
tensor::Shape read_idx_shape(const std::string& path);

// Fashion-MNIST (or MNIST) from a directory holding train-images-idx3-ubyte.gz,
// train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz:
// u8 images [N, 28, 28] and u8 labels [N] in 0..9, checked to agree in count.
struct Mnist {
  tensor::TensorData train_images, train_labels, test_images, test_labels;
};
Mnist load_mnist(const std::string& dir, std::size_t max_train = std::numeric_limits<std::size_t>::max(),
                 std::size_t max_test = std::numeric_limits<std::size_t>::max());

// The data directory: an explicit one as given, else $TENSOR_FASHION_MNIST, else
// .cache/fashion-mnist beside the executable (any parent) or the cwd
// (scripts/fetch-fashion-mnist.sh), else /usr/share/datasets/fashion-mnist (the installed
// dataset-fashion-mnist package). Empty when none has the files.
std::string find_fashion_mnist(const std::string& explicit_dir = {});

}  // namespace datasets
