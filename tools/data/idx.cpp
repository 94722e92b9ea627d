// IDX reading (idx.hpp): zlib's gzread reads gzip and plain files alike.
#include "idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace datasets {
namespace {

using tensor::DType;
using tensor::FormatError;
using tensor::TensorData;

const char* kFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"};

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    if (!f_) throw FormatError(path, "[read_idx] cannot open '" + path + "': " + std::strerror(errno));
  }
  ~Reader() { gzclose(f_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  [[noreturn]] void fail(std::uint64_t at, const std::string& what) const {
    throw FormatError(path_, "[read_idx] '" + path_ + "' at byte offset " + std::to_string(at) + ": " + what);
  }
  // Reads n bytes (fewer only at the end of the stream); returns how many.
  std::size_t read(void* dst, std::size_t n) {
    std::size_t got = 0;
    auto* p = static_cast<unsigned char*>(dst);
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
      const int r = gzread(f_, p + got, chunk);
      if (r < 0) {
        int err = 0;
        const char* msg = gzerror(f_, &err);
        fail(offset_ + got, std::string("decompression failed: ") + msg);
      }
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    offset_ += got;
    return got;
  }
  void read_exact(void* dst, std::size_t n, const std::string& what) {
    const std::uint64_t start = offset_;
    const std::size_t got = read(dst, n);
    if (got != n)
      fail(start + got, "truncated " + what + "; expected " + std::to_string(n) + " bytes; got " + std::to_string(got));
  }
  std::uint64_t offset() const { return offset_; }

 private:
  std::string path_;
  gzFile f_;
  std::uint64_t offset_ = 0;
};

struct Header {
  DType dtype;
  std::vector<std::size_t> dims;
};

Header read_header(Reader& r) {
  unsigned char magic[4];
  r.read_exact(magic, 4, "magic number");
  if (magic[0] != 0 || magic[1] != 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%02x %02x", magic[0], magic[1]);
    r.fail(0, std::string("not an IDX file; expected the magic to start with 00 00; got ") + hex);
  }
  DType dtype = DType::U8;
  switch (magic[2]) {
    case 0x08: dtype = DType::U8; break;
    case 0x09: dtype = DType::I8; break;
    case 0x0B: dtype = DType::I16; break;
    case 0x0C: dtype = DType::I32; break;
    case 0x0D: dtype = DType::F32; break;
    case 0x0E: dtype = DType::F64; break;
    default:
      r.fail(2, "unknown element type; expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E; got " + std::to_string(magic[2]));
  }
  const std::size_t rank = magic[3];
  if (rank == 0 || rank > tensor::kMaxRank)
    r.fail(3, "rank out of range; expected 1.." + std::to_string(tensor::kMaxRank) + "; got " + std::to_string(rank));
  std::vector<std::size_t> dims(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    unsigned char b[4];
    r.read_exact(b, 4, "dimension " + std::to_string(i));
    dims[i] = (std::size_t{b[0]} << 24) | (std::size_t{b[1]} << 16) | (std::size_t{b[2]} << 8) | b[3];
  }
  return {dtype, dims};
}

}  // namespace

tensor::Shape read_idx_shape(const std::string& path) {
  Reader r(path);
  return tensor::Shape(read_header(r).dims);
}

TensorData read_idx(const std::string& path, std::size_t max_items) {
  Reader r(path);
  auto [dtype, dims] = read_header(r);
  const std::uint64_t data_start = r.offset();
  dims[0] = std::min(dims[0], max_items);
  const std::size_t width = tensor::dtype_size(dtype);
  std::size_t count = width;
  for (std::size_t d : dims) {
    if (d != 0 && count > (std::size_t{1} << 40) / d) r.fail(4, "dimensions too large for memory (over 1 TiB of data)");
    count *= d;
  }
  std::vector<std::byte> bytes(count);
  r.read_exact(bytes.data(), count, "data (shape " + tensor::Shape(dims).to_string() + ")");
  if (max_items == std::numeric_limits<std::size_t>::max()) {
    unsigned char extra;
    if (r.read(&extra, 1) != 0) r.fail(data_start + count, "trailing bytes after the data");
  }
  if (width > 1)
    for (std::size_t i = 0; i < count; i += width) std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                                                                bytes.begin() + static_cast<std::ptrdiff_t>(i + width));
  return TensorData(std::move(bytes), tensor::Shape(dims), dtype);
}

Mnist load_mnist(const std::string& dir, std::size_t max_train, std::size_t max_test) {
  namespace fs = std::filesystem;
  auto load = [&](int which, std::size_t limit, bool images) {
    const std::string path = (fs::path(dir) / kFiles[which]).string();
    TensorData d = read_idx(path, limit);
    const auto& s = d.shape();
    const bool ok = d.dtype() == DType::U8 && (images ? s.rank() == 3 && s[1] == 28 && s[2] == 28 : s.rank() == 1);
    if (!ok)
      throw FormatError(path, "[load_mnist] '" + path + "': expected u8 " + (images ? "images [N, 28, 28]" : "labels [N]") + "; got " +
                                  std::string(tensor::dtype_name(d.dtype())) + " " + s.to_string());
    return d;
  };
  Mnist m{load(0, max_train, true), load(1, max_train, false), load(2, max_test, true), load(3, max_test, false)};
  const std::pair<const TensorData*, const TensorData*> pairs[] = {{&m.train_images, &m.train_labels}, {&m.test_images, &m.test_labels}};
  for (int k = 0; k < 2; ++k) {
    const std::string path = (fs::path(dir) / kFiles[2 * k + 1]).string();
    if (pairs[k].first->shape()[0] != pairs[k].second->shape()[0])
      throw FormatError(path, "[load_mnist] '" + path + "': label count differs from the image count; expected " +
                                  std::to_string(pairs[k].first->shape()[0]) + "; got " + std::to_string(pairs[k].second->shape()[0]));
    const auto& b = pairs[k].second->bytes();
    for (std::size_t i = 0; i < b.size(); ++i)
      if (std::to_integer<unsigned>(b[i]) > 9)
        throw FormatError(path, "[load_mnist] '" + path + "' at byte offset " + std::to_string(8 + i) +
                                    ": label out of range; expected 0..9; got " + std::to_string(std::to_integer<unsigned>(b[i])));
  }
  return m;
}

std::string find_fashion_mnist(const std::string& explicit_dir) {
  namespace fs = std::filesystem;
  if (!explicit_dir.empty()) return explicit_dir;
  if (const char* env = std::getenv("TENSOR_FASHION_MNIST"); env && *env) return env;
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = ec ? fs::current_path() : exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    candidates.push_back(dir / ".cache" / "fashion-mnist");
    if (dir == dir.root_path()) break;
  }
  candidates.push_back(fs::current_path() / ".cache" / "fashion-mnist");
  candidates.push_back("/usr/share/datasets/fashion-mnist");
  for (const auto& c : candidates)
    if (fs::exists(c / kFiles[2], ec)) return c.string();
  return {};
}

}  // namespace datasets
