// Quantized tensors in .safetensors files (lib/src/io_quant.cpp): the convention's exact
// entries and bytes (worked out by hand below), byte-exact round trips for every value, store,
// scale dtype and level, and each way a file's codes, scales and scheme can disagree.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <tensor/io.hpp>
#include <tensor/quantization.hpp>

namespace {

using namespace tensor;
namespace fs = std::filesystem;
namespace qz = tensor::quantization;

std::string tmp_path(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tensor_io_quant_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}
struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    fs::remove_all(fs::path(::testing::TempDir()) / ("tensor_io_quant_test_" + std::to_string(::getpid())), ec);
  }
} cleanup;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

QuantScheme scheme(QuantValue v, QuantStore st, ScaleDtype p) { return QuantScheme{}.with_value(v).with_store(st).with_param(p); }

// Codes -r..r in a fixed pattern (r = the value's largest code), scales 0.5, 0.25, 0.125, ...
TensorData codes_data(const Shape& shape, const QuantScheme& s) {
  const int r = s.size_bits_value() == 8 ? 127 : s.size_bits_value() == 4 ? 7 : 1;
  std::vector<std::int8_t> codes(shape.num_elements());
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::int8_t>(static_cast<int>((i * 5 + 3) % (2 * r + 1)) - r);
  std::vector<float> scales(qz::params_shape(shape, s).num_elements());
  for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = 0.5f / static_cast<float>(1u << (i % 6));
  return qz::quantized_data(codes, shape, s, scales);
}

// A Q4S [2, 3] tensor, PackedU32, one f16 scale per row: codes {1, -2, 7} and {-7, 0, 3},
// scales 0.5 and 0.25. Each row is its own u32 word (burn packs line by line), lowest nibble
// first: 0x000007E1 and 0x00000309; the scales are f16 0x3800 and 0x3400.
TEST(SafetensorsQuantized, EntriesAndBytesFollowTheConvention) {
  const QuantScheme s = scheme(QuantValue::Q4S, QuantStore::PackedU32, ScaleDtype::F16).with_level(QuantLevel::block({1, 3}));
  const TensorData w = qz::quantized_data({1, -2, 7, -7, 0, 3}, Shape{2, 3}, s, {0.5f, 0.25f});
  const std::string path = tmp_path("layout.safetensors");
  io::save_safetensors(path, {{"w", w}, {"b", TensorData::from(std::vector<float>{1.0f})}}, {{"note", "x"}});
  const std::string file = read_all(path);
  EXPECT_NE(file.find(R"("w":{"dtype":"U32","shape":[2,1],"data_offsets":[0,8]})"), std::string::npos) << file;
  EXPECT_NE(file.find(R"("w.qscales":{"dtype":"F16","shape":[2,1],"data_offsets":[8,12]})"), std::string::npos) << file;
  EXPECT_NE(file.find(R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]})"), std::string::npos) << file;
  EXPECT_NE(file.find(R"("qscheme.w":"{\"block\":[1,3],\"param\":\"f16\",\"scales\":\"w.qscales\",\"shape\":[2,3],)"
                      R"(\"store\":\"packed-u32\",\"value\":\"q4s\"}")"),
            std::string::npos)
      << file;
  const std::string data = std::string("\xE1\x07\x00\x00\x09\x03\x00\x00\x00\x38\x00\x34", 12) + std::string("\x00\x00\x80\x3f", 4);
  ASSERT_GE(file.size(), data.size());
  EXPECT_EQ(file.substr(file.size() - data.size()), data);

  const io::SafetensorsFile f = io::load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 2u);  // the scales entry is joined into w
  EXPECT_EQ(f.tensors[0].first, "w");
  EXPECT_EQ(f.tensors[0].second, w);
  EXPECT_EQ(f.tensors[1].first, "b");
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"note", "x"}}));  // the scheme key is the loader's
  const qz::QuantizedValues v = qz::quantized_values(f.tensors[0].second);
  EXPECT_EQ(v.codes, (std::vector<std::int8_t>{1, -2, 7, -7, 0, 3}));
  EXPECT_EQ(v.scales, (std::vector<float>{0.5f, 0.25f}));
  // Saved again, the loaded tensors and metadata make the same file.
  const std::string again = tmp_path("again.safetensors");
  io::save_safetensors(again, f.tensors, f.metadata);
  EXPECT_EQ(read_all(again), file);
}

TEST(SafetensorsQuantized, RoundTripsAreByteExactForEveryScheme) {
  const Shape shapes[] = {Shape{4, 6}, Shape{2, 3, 10}, Shape{3, 16}, Shape{}, Shape{0, 6}, Shape{5}};
  for (QuantValue v : {QuantValue::Q8F, QuantValue::Q8S, QuantValue::Q4F, QuantValue::Q4S, QuantValue::Q2F, QuantValue::Q2S})
    for (QuantStore st : {QuantStore::Native, QuantStore::PackedU32})
      for (ScaleDtype p : {ScaleDtype::F32, ScaleDtype::F16, ScaleDtype::BF16})
        for (const Shape& shape : shapes)
          for (bool block : {false, true}) {
            QuantScheme s = scheme(v, st, p);
            if (block && shape.rank() >= 1) s = s.with_level(QuantLevel::block({shape[shape.rank() - 1] == 6 ? 3u : 1u}));
            SCOPED_TRACE(to_string(s) + " " + shape.to_string());
            const TensorData a = codes_data(shape, s);
            const TensorData b = codes_data(Shape{3, 6}, s.with_level(QuantLevel::block({1, 6})));
            const std::string path = tmp_path("round.safetensors");
            io::save_safetensors(path, {{"a", a}, {"plain", TensorData::from(std::vector<std::int32_t>{4, 5})}, {"b", b}});
            const io::SafetensorsFile f = io::load_safetensors(path);
            ASSERT_EQ(f.tensors.size(), 3u);
            EXPECT_EQ(f.tensors[0], (std::pair<std::string, TensorData>{"a", a}));
            EXPECT_EQ(f.tensors[1].first, "plain");
            EXPECT_EQ(f.tensors[2], (std::pair<std::string, TensorData>{"b", b}));
            EXPECT_TRUE(f.metadata.empty());
          }
}

// Files whose parts disagree, written as plain tensors and metadata (save_safetensors passes
// them through as given): each load is a FormatError naming the file and the tensor.
TEST(SafetensorsQuantized, DisagreeingPartsAreFormatErrors) {
  const std::string good =
      R"({"block":[1,3],"param":"f16","scales":"w.qscales","shape":[2,3],"store":"packed-u32","value":"q4s"})";
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  const TensorData codes(std::vector<std::byte>(8), Shape{2, 1}, DType::U32);
  const TensorData scales(std::vector<std::byte>(4), Shape{2, 1}, DType::F16);
  struct Case {
    const char* what;
    io::NamedTensors tensors;
    std::string scheme;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"not JSON", {{"w", codes}, {"w.qscales", scales}}, "{block", "is not a JSON object"},
      {"unknown value", {{"w", codes}, {"w.qscales", scales}}, with("q4s", "q3s"), "unknown value"},
      {"unknown store", {{"w", codes}, {"w.qscales", scales}}, with("packed-u32", "packed-u16"), "unknown store"},
      {"unknown param", {{"w", codes}, {"w.qscales", scales}}, with("\"f16\"", "\"f8\""), "unknown param"},
      {"no shape", {{"w", codes}, {"w.qscales", scales}}, with("\"shape\":[2,3],", ""), "no \"shape\""},
      {"a block that does not divide", {{"w", codes}, {"w.qscales", scales}}, with("[1,3]", "[1,2]"), "block does not fit"},
      {"a zero block extent", {{"w", codes}, {"w.qscales", scales}}, with("[1,3]", "[0,3]"), "block extent 0"},
      {"codes missing", {{"w.qscales", scales}}, good, "codes are not in the file"},
      {"scales missing", {{"w", codes}}, good, "scales 'w.qscales' are not in the file"},
      {"codes of the wrong dtype",
       {{"w", TensorData(std::vector<std::byte>(8), Shape{2, 1}, DType::F32)}, {"w.qscales", scales}},
       good,
       "codes of the wrong dtype or shape"},
      {"codes of the wrong shape",
       {{"w", TensorData(std::vector<std::byte>(8), Shape{1, 2}, DType::U32)}, {"w.qscales", scales}},
       good,
       "codes of the wrong dtype or shape"},
      {"scales of the wrong dtype",
       {{"w", codes}, {"w.qscales", TensorData(std::vector<std::byte>(8), Shape{2, 1}, DType::F32)}},
       good,
       "scales of the wrong dtype or shape"},
      {"scales of the wrong grid",
       {{"w", codes}, {"w.qscales", TensorData(std::vector<std::byte>(4), Shape{1, 2}, DType::F16)}},
       good,
       "scales of the wrong dtype or shape"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = tmp_path("bad.safetensors");
    io::save_safetensors(path, c.tensors, {{"qscheme.w", c.scheme}});
    try {
      io::load_safetensors(path);
      ADD_FAILURE() << "loaded";
    } catch (const FormatError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("[load_safetensors]"), std::string::npos) << m;
      EXPECT_NE(m.find("quantized tensor 'w'"), std::string::npos) << m;
      EXPECT_NE(m.find(c.message), std::string::npos) << m;
    }
  }
  // Two schemes that claim the same scales.
  const std::string path = tmp_path("shared.safetensors");
  io::save_safetensors(path, {{"w", codes}, {"v", codes}, {"w.qscales", scales}},
                       {{"qscheme.w", good}, {"qscheme.v", good}});
  EXPECT_THROW(io::load_safetensors(path), FormatError);
}

TEST(SafetensorsQuantized, SavingOverAReservedKeyOrNameIsAFormatError) {
  const QuantScheme s = scheme(QuantValue::Q8S, QuantStore::Native, ScaleDtype::F32);
  const TensorData w = codes_data(Shape{2, 2}, s);
  const std::string path = tmp_path("reserved.safetensors");
  try {
    io::save_safetensors(path, {{"w", w}}, {{"qscheme.w", "mine"}});
    ADD_FAILURE() << "saved";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("metadata key 'qscheme.w' is reserved"), std::string::npos) << e.what();
  }
  // A plain tensor already called "w.qscales" collides with w's scales.
  EXPECT_THROW(io::save_safetensors(path, {{"w", w}, {"w.qscales", TensorData::from(std::vector<float>{1.0f})}}), FormatError);
  // Metadata keys outside the "qscheme." prefix pass through beside it.
  io::save_safetensors(path, {{"w", w}}, {{"qscheme", "mine"}, {"qschemes.w", "also mine"}});
  const io::SafetensorsFile f = io::load_safetensors(path);
  EXPECT_EQ(f.tensors.at(0).second, w);
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"qscheme", "mine"}, {"qschemes.w", "also mine"}}));
}

}  // namespace
