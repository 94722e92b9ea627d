// tools/data/idx: IDX files written by the test (plain and gzip), each malformed case with
// the byte offset its error names, and the real Fashion-MNIST cache (fetched by bootstrap).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "idx.hpp"

namespace {

namespace fs = std::filesystem;
using tensor::DType;
using tensor::FormatError;
using tensor::Shape;

std::string tmp_path(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("idx_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}
void write_plain(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}
std::string be32(std::uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>((v >> 16) & 0xff), static_cast<char>((v >> 8) & 0xff),
                     static_cast<char>(v & 0xff)};
}
std::string header(unsigned char type, std::vector<std::uint32_t> dims) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (auto d : dims) s += be32(d);
  return s;
}

// Expects FormatError whose message names the path and "at byte offset <offset>" and holds `what`.
void expect_error(const std::string& path, std::uint64_t offset, const std::string& what, std::size_t max_items = SIZE_MAX) {
  try {
    (void)datasets::read_idx(path, max_items);
    ADD_FAILURE() << path << ": no exception";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(msg.find("[read_idx] '" + path + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("at byte offset " + std::to_string(offset) + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(Idx, ReadsImagesPlainAndGzip) {
  // Two 2x3 u8 "images": pixels 0..11.
  std::string bytes = header(0x08, {2, 2, 3});
  for (int i = 0; i < 12; ++i) bytes.push_back(static_cast<char>(i * 20));
  for (const bool gz : {false, true}) {
    const std::string path = tmp_path(gz ? "img.gz" : "img");
    if (gz) write_gz(path, bytes);
    else write_plain(path, bytes);
    const tensor::TensorData d = datasets::read_idx(path);
    EXPECT_EQ(d.dtype(), DType::U8);
    EXPECT_EQ(d.shape(), (Shape{2, 2, 3}));
    EXPECT_EQ(d.to_vec<std::uint8_t>(), (std::vector<std::uint8_t>{0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220}));
    EXPECT_EQ(datasets::read_idx_shape(path), (Shape{2, 2, 3}));
    // The first item only.
    const tensor::TensorData one = datasets::read_idx(path, 1);
    EXPECT_EQ(one.shape(), (Shape{1, 2, 3}));
    EXPECT_EQ(one.to_vec<std::uint8_t>(), (std::vector<std::uint8_t>{0, 20, 40, 60, 80, 100}));
  }
}

TEST(Idx, MultiByteTypesAreBigEndian) {
  const std::string p32 = tmp_path("i32");
  write_plain(p32, header(0x0C, {2}) + be32(0x01020304) + be32(0xfffffffe));
  EXPECT_EQ(datasets::read_idx(p32).to_vec<std::int32_t>(), (std::vector<std::int32_t>{0x01020304, -2}));
  const std::string pf = tmp_path("f32");
  write_plain(pf, header(0x0D, {1}) + std::string("\x3f\xc0\x00\x00", 4));  // 1.5f
  EXPECT_EQ(datasets::read_idx(pf).to_vec<float>(), std::vector<float>{1.5f});
  const std::string p16 = tmp_path("i16");
  write_plain(p16, header(0x0B, {1}) + std::string("\x80\x01", 2));
  EXPECT_EQ(datasets::read_idx(p16).to_vec<std::int16_t>(), std::vector<std::int16_t>{-32767});
}

TEST(Idx, MalformedFilesNameTheOffset) {
  struct Case { const char* name; std::string bytes; std::uint64_t offset; const char* what; };
  const std::vector<Case> cases = {
      {"empty", "", 0, "truncated magic number"},
      {"short_magic", std::string("\0\0", 2), 2, "truncated magic number"},
      {"not_idx", "PK\x03\x04zzzz", 0, "not an IDX file"},
      {"bad_type", header(0x07, {1}) + "x", 2, "unknown element type"},
      {"rank0", header(0x08, {}), 3, "rank out of range"},
      {"short_dims", header(0x08, {2, 3}).substr(0, 10), 10, "truncated dimension 1"},
      {"short_data", header(0x08, {2, 3}) + "abcde", 17, "truncated data"},
      {"trailing", header(0x08, {2}) + "abc", 10, "trailing bytes"},
      {"huge", header(0x0E, {65536, 65536, 65536}), 4, "too large"},
  };
  for (const Case& c : cases) {
    for (const bool gz : {false, true}) {
      const std::string path = tmp_path(std::string(c.name) + (gz ? ".gz" : ""));
      if (gz) write_gz(path, c.bytes);
      else write_plain(path, c.bytes);
      SCOPED_TRACE(path);
      expect_error(path, c.offset, c.what);
    }
  }
  // A gzip stream cut short is an error too (a decompression or truncation error).
  std::string big = header(0x08, {4096});
  for (int i = 0; i < 4096; ++i) big.push_back(static_cast<char>((i * 7919) & 0xff));
  const std::string whole = tmp_path("whole.gz"), cut = tmp_path("cut.gz");
  write_gz(whole, big);
  std::ifstream in(whole, std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), {});
  write_plain(cut, gz.substr(0, gz.size() / 2));
  EXPECT_THROW((void)datasets::read_idx(cut), FormatError);
  EXPECT_THROW((void)datasets::read_idx(tmp_path("missing")), FormatError);
}

TEST(Idx, MnistLoaderChecksShapesAndLabels) {
  const std::string dir = tmp_path("mnist");
  fs::create_directories(dir);
  std::string img = header(0x08, {2, 28, 28}) + std::string(2 * 784, '\x10');
  write_gz(dir + "/train-images-idx3-ubyte.gz", img);
  write_gz(dir + "/train-labels-idx1-ubyte.gz", header(0x08, {2}) + "\x03\x09");
  write_gz(dir + "/t10k-images-idx3-ubyte.gz", img);
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", header(0x08, {2}) + std::string("\x00\x0a", 2));  // label 10
  try {
    (void)datasets::load_mnist(dir);
    ADD_FAILURE() << "no exception";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("t10k-labels-idx1-ubyte.gz' at byte offset 9: label out of range"), std::string::npos) << e.what();
  }
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", header(0x08, {1}) + std::string("\x00", 1));
  EXPECT_THROW((void)datasets::load_mnist(dir), FormatError);  // 2 images, 1 label
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", header(0x08, {2}) + std::string("\x00\x01", 2));
  const datasets::Mnist m = datasets::load_mnist(dir);
  EXPECT_EQ(m.train_images.shape(), (Shape{2, 28, 28}));
  EXPECT_EQ(m.train_labels.to_vec<std::uint8_t>(), (std::vector<std::uint8_t>{3, 9}));
}

// The real data set (scripts/bootstrap.sh always fetches it). Reads the headers, both label
// files (small) and the first five test images: fast.
TEST(FashionMnist, CacheHasTheDataSet) {
  const std::string dir = datasets::find_fashion_mnist();
  ASSERT_FALSE(dir.empty()) << "no Fashion-MNIST: run scripts/fetch-fashion-mnist.sh (bootstrap does)";
  EXPECT_EQ(datasets::read_idx_shape(dir + "/train-images-idx3-ubyte.gz"), (Shape{60000, 28, 28}));
  EXPECT_EQ(datasets::read_idx_shape(dir + "/t10k-images-idx3-ubyte.gz"), (Shape{10000, 28, 28}));
  const datasets::Mnist m = datasets::load_mnist(dir, 0, 5);
  EXPECT_EQ(m.test_images.shape(), (Shape{5, 28, 28}));
  EXPECT_EQ(m.test_labels.to_vec<std::uint8_t>(), (std::vector<std::uint8_t>{9, 2, 1, 1, 6}));  // ankle boot, pullover, ...
  const auto px = m.test_images.to_vec<std::uint8_t>();
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < 784; ++i) sum += px[i];
  EXPECT_EQ(sum, 33456u);  // first test image, summed by an independent reader (Python's gzip)
  // Labels: 10 balanced classes, 6000 each in train, 1000 each in test.
  for (const auto& [file, n] : {std::pair{"/train-labels-idx1-ubyte.gz", 6000u}, std::pair{"/t10k-labels-idx1-ubyte.gz", 1000u}}) {
    const auto labels = datasets::read_idx(dir + file).to_vec<std::uint8_t>();
    std::vector<unsigned> count(10);
    for (std::uint8_t l : labels) {
      ASSERT_LT(l, 10u);
      ++count[l];
    }
    EXPECT_EQ(count, std::vector<unsigned>(10, n)) << file;
  }
}

}  // namespace
