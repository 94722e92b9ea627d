// tensor/io.hpp: .safetensors and .npy round trips for every stored dtype, the files'
// exact layout (bytes written out in the tests), and each corrupt-file case.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/sysinfo.h>

#include <tensor/io.hpp>

#include "test_util.hpp"

namespace {

using namespace tensor;
namespace fs = std::filesystem;

// One scratch folder per test process, removed when the process ends (a run used to leave
// one ~1 MiB folder in /tmp each time).
fs::path scratch_dir() { return fs::path(::testing::TempDir()) / ("tensor_io_test_" + std::to_string(::getpid())); }
struct ScratchCleanup {
  ~ScratchCleanup() {
    std::error_code ec;
    fs::remove_all(scratch_dir(), ec);
  }
} scratch_cleanup;

std::string tmp_path(const std::string& name) {
  const fs::path dir = scratch_dir();
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string le64(std::uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}
// A safetensors file from a header text and data bytes (no padding added).
std::string st_file(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

// Raw element bytes: byte k of the buffer is (k * 37 + seed) mod 256 (bools get k % 2).
TensorData pattern(DType t, Shape shape, int seed) {
  std::vector<std::byte> b(shape.num_elements() * dtype_size(t));
  for (std::size_t k = 0; k < b.size(); ++k)
    b[k] = std::byte{static_cast<unsigned char>(is_bool(t) ? (k / dtype_size(t)) % 2 : (k * 37 + static_cast<std::size_t>(seed)) % 256)};
  return TensorData(std::move(b), shape, t);
}

const DType kStored[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I16,
                         DType::I8,  DType::U64, DType::U32, DType::U16,  DType::U8,   DType::Bool};

// ---- safetensors -----------------------------------------------------------------------

TEST(Safetensors, RoundTripsEveryDtypeInOrder) {
  io::NamedTensors in;
  int seed = 1;
  for (DType t : kStored) in.emplace_back(std::string("t_") + std::string(dtype_name(t)), pattern(t, Shape{2, 3}, seed++));
  in.emplace_back("scalar", TensorData::from(std::vector<float>{2.5f}, Shape{}));
  in.emplace_back("empty", TensorData::zeros(Shape{0, 4}, DType::I32));
  const std::string path = tmp_path("all.safetensors");
  io::save_safetensors(path, in, {{"format", "pt"}, {"step", "12"}});
  const io::SafetensorsFile out = io::load_safetensors(path);
  ASSERT_EQ(out.tensors.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out.tensors[i].first, in[i].first);
    EXPECT_TRUE(out.tensors[i].second == in[i].second) << in[i].first;
  }
  EXPECT_EQ(out.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"step", "12"}}));
  EXPECT_EQ(out.at("scalar").to_vec<float>(), std::vector<float>{2.5f});
  EXPECT_EQ(out.at("scalar").shape().rank(), 0u);
  EXPECT_TRUE(out.contains("empty"));
  EXPECT_FALSE(out.contains("nope"));
  EXPECT_THROWS(IndexError, out.at("nope"), "nope");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(Safetensors, BoolStoragesAreWrittenAsOneByte) {
  const TensorData u32 = TensorData::from(std::vector<bool>{true, false, true}).convert(DType::BoolU32);
  const std::string path = tmp_path("bool.safetensors");
  io::save_safetensors(path, {{"m", u32}});
  const TensorData back = io::load_safetensors(path).at("m");
  EXPECT_EQ(back.dtype(), DType::Bool);
  EXPECT_EQ(back.bytes(), (std::vector<std::byte>{std::byte{1}, std::byte{0}, std::byte{1}}));
}

// The exact bytes: u64 length, compact JSON in the given order, space padding to 8, data.
TEST(Safetensors, LayoutFollowsTheSpecification) {
  const std::string path = tmp_path("layout.safetensors");
  io::save_safetensors(path, {{"w", TensorData::from(std::vector<float>{1.0f, -2.0f})},
                              {"b", TensorData::from(std::vector<std::uint8_t>{7, 8, 9}, Shape{1, 3})}});
  const std::string json =
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[1,3],"data_offsets":[8,11]}})";
  ASSERT_EQ(json.size(), 109u);  // padded to 112
  const std::string want = le64(112) + json + "   " + std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8) + "\x07\x08\x09";
  const std::string got = read_all(path);
  EXPECT_EQ(got, want);
  // The rules in general: header length a multiple of 8, data starts 8-aligned, the file ends
  // at the last offset.
  EXPECT_EQ((8 + 112) % 8, 0);
  EXPECT_EQ(got.size(), 8u + 112u + 11u);
}

// Names of 1..8 characters give every header length modulo 8: each is padded with spaces
// (and only spaces) to the next multiple of 8, and the data follows at once.
TEST(Safetensors, HeaderIsSpacePaddedToEightForEveryLength) {
  for (std::size_t len = 1; len <= 8; ++len) {
    const std::string name(len, 'n');
    const std::string path = tmp_path("pad" + std::to_string(len) + ".safetensors");
    io::save_safetensors(path, {{name, TensorData::from(std::vector<std::uint8_t>{42})}});
    const std::string json = "{\"" + name + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
    const std::size_t padded = (json.size() + 7) / 8 * 8;
    const std::string got = read_all(path);
    ASSERT_EQ(got.size(), 8 + padded + 1) << len;
    EXPECT_EQ(got.substr(0, 8), le64(padded)) << len;
    EXPECT_EQ(got.substr(8, json.size()), json) << len;
    EXPECT_EQ(got.substr(8 + json.size(), padded - json.size()), std::string(padded - json.size(), ' ')) << len;
    EXPECT_EQ(got.back(), '\x2a') << len;
  }
}

TEST(Safetensors, MetadataComesFirst) {
  const std::string path = tmp_path("meta.safetensors");
  io::save_safetensors(path, {{"x", TensorData::from(std::vector<std::int8_t>{-1})}}, {{"k", "v"}});
  const std::string json = R"({"__metadata__":{"k":"v"},"x":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})";
  const std::size_t padded = (json.size() + 7) / 8 * 8;
  EXPECT_EQ(read_all(path), le64(padded) + json + std::string(padded - json.size(), ' ') + "\xff");
}

// A file as another writer may produce it: keys not in offset order, whitespace, metadata last.
TEST(Safetensors, ReadsForeignKeyOrderAndSortsByOffset) {
  const std::string path = tmp_path("foreign.safetensors");
  const std::string header =
      R"({ "b": {"dtype": "I16", "shape": [2], "data_offsets": [4, 8]}, "a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}, "__metadata__": {"who": "torch"} })";
  write_all(path, st_file(header, std::string("\x00\x00\x40\x40", 4) + std::string("\x05\x00\xfe\xff", 4)));
  const io::SafetensorsFile f = io::load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "a");
  EXPECT_EQ(f.tensors[1].first, "b");
  EXPECT_EQ(f.at("a").to_vec<float>(), std::vector<float>{3.0f});
  EXPECT_EQ(f.at("b").to_vec<std::int16_t>(), (std::vector<std::int16_t>{5, -2}));
  EXPECT_EQ(f.metadata.at("who"), "torch");
}

struct Corrupt {
  const char* name;
  std::string bytes;
  std::vector<std::string> fragments;
};

TEST(Safetensors, CorruptFilesAreFormatErrorsNamingPathAndTensor) {
  const std::string f32x2 = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\x01');
  const std::vector<Corrupt> cases = {
      {"short", std::string("\x05\x00\x00", 3), {"truncated", "got 3"}},
      {"header_beyond", le64(100) + "{}", {"header length beyond the file", "100"}},
      {"header_huge", le64(1ull << 40) + "{}", {"header length too large"}},
      {"bad_json", st_file(R"({"a": {"dtype": )", ""), {"not valid JSON"}},
      {"not_object", st_file("[1, 2]", ""), {"not a JSON object"}},
      {"data_beyond", st_file(R"({"a":)" + f32x2 + "}", std::string(7, '\x01')), {"tensor 'a'", "beyond the file", "[0, 8]"}},
      {"overlap", st_file(R"({"a":)" + f32x2 + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\x01')),
       {"tensor 'b'", "overlap", "expected begin 8", "[4, 12]"}},
      {"reversed", st_file(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", data8), {"tensor 'a'", "out of order", "[8, 0]"}},
      {"gap", st_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", data8), {"tensor 'a'", "gap", "expected begin 0"}},
      {"trailing", st_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", data8), {"trailing bytes", "expected 4", "got 8"}},
      {"unknown_dtype", st_file(R"({"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", data8),
       {"tensor 'a'", "unknown dtype", "F8_E4M3"}},
      {"shape_mismatch", st_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
       {"tensor 'a'", "do not match the byte count", "expected 12 bytes", "8 bytes"}},
      {"shape_overflow", st_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data8),
       {"tensor 'a'", "overflowing"}},
      {"negative_dim", st_file(R"({"a":{"dtype":"U8","shape":[-8],"data_offsets":[0,8]}})", data8), {"tensor 'a'", "unsigned"}},
      {"no_offsets", st_file(R"({"a":{"dtype":"U8","shape":[8]}})", data8), {"tensor 'a'", "data_offsets"}},
      {"rank_9", st_file(R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,8],"data_offsets":[0,8]}})", data8), {"tensor 'a'", "rank"}},
      {"bad_metadata", st_file(R"({"__metadata__":{"k":1}})", ""), {"__metadata__", "'k'"}},
  };
  for (const Corrupt& c : cases) {
    const std::string path = tmp_path(std::string(c.name) + ".safetensors");
    write_all(path, c.bytes);
    try {
      (void)io::load_safetensors(path);
      ADD_FAILURE() << c.name << ": no exception";
    } catch (const FormatError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.path(), path) << c.name;
      EXPECT_NE(msg.find("[load_safetensors]"), std::string::npos) << c.name << ": " << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
      for (const std::string& f : c.fragments) EXPECT_NE(msg.find(f), std::string::npos) << c.name << " lacks '" << f << "': " << msg;
    }
  }
}

TEST(Safetensors, ACorruptTensorAfterAGoodOneLoadsNothing) {
  // 'a' is fine, 'b' runs past the end: the call throws and returns no partial file.
  const std::string path = tmp_path("half.safetensors");
  write_all(path, st_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                          "\x01\x02\x03"));
  EXPECT_THROWS(FormatError, io::load_safetensors(path), "tensor 'b'", "beyond the file");
}

TEST(Safetensors, MissingFileAndBadSaves) {
  const std::string missing = tmp_path("missing.safetensors");
  EXPECT_THROWS(FormatError, io::load_safetensors(missing), "[load_safetensors]", "cannot open", missing);
  const TensorData x = TensorData::from(std::vector<float>{1.0f});
  const std::string path = tmp_path("bad_save.safetensors");
  EXPECT_THROWS(FormatError, io::save_safetensors(path, {{"a", x}, {"a", x}}), "[save_safetensors]", "duplicate", "'a'");
  EXPECT_THROWS(FormatError, io::save_safetensors(path, {{"__metadata__", x}}), "[save_safetensors]", "invalid tensor name");
  EXPECT_THROWS(FormatError, io::save_safetensors(path, {{"", x}}), "[save_safetensors]", "invalid tensor name");
  EXPECT_FALSE(fs::exists(path));
  const std::string nodir = tmp_path("no_such_dir") + "/x.safetensors";
  EXPECT_THROWS(FormatError, io::save_safetensors(nodir, {{"a", x}}), "[save_safetensors]", "cannot create");
  EXPECT_FALSE(fs::exists(nodir));
}

// ---- npy -------------------------------------------------------------------------------

TEST(Npy, ExactHeaderOfAFloat32Matrix) {
  // What numpy.save writes for np.zeros((2, 3), '<f4') with 1.0 at [0, 0]: magic, version 1.0,
  // header length 118 (0x76), the dict padded with spaces to a 128-byte prefix, '\n'.
  const std::string path = tmp_path("m.npy");
  io::save_npy(path, TensorData::from(std::vector<float>{1, 0, 0, 0, 0, 0}, Shape{2, 3}));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string want = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n" +
                           std::string("\x00\x00\x80\x3f", 4) + std::string(20, '\0');
  EXPECT_EQ(read_all(path), want);
}

TEST(Npy, ShapesOfRankZeroAndOne) {
  const std::string p1 = tmp_path("v.npy"), p0 = tmp_path("s.npy");
  io::save_npy(p1, TensorData::from(std::vector<std::int64_t>{4, -5, 6}));
  io::save_npy(p0, TensorData::from(std::vector<std::uint8_t>{9}, Shape{}));
  EXPECT_NE(read_all(p1).find("'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"), std::string::npos);
  EXPECT_NE(read_all(p0).find("'descr': '|u1', 'fortran_order': False, 'shape': (), }"), std::string::npos);
  EXPECT_EQ(io::load_npy(p1).to_vec<std::int64_t>(), (std::vector<std::int64_t>{4, -5, 6}));
  const TensorData s = io::load_npy(p0);
  EXPECT_EQ(s.shape().rank(), 0u);
  EXPECT_EQ(s.to_vec<std::uint8_t>(), std::vector<std::uint8_t>{9});
}

TEST(Npy, RoundTripsEveryNumpyDtype) {
  int seed = 3;
  for (DType t : kStored) {
    const std::string path = tmp_path("rt_" + std::string(dtype_name(t)) + ".npy");
    const TensorData d = pattern(t, Shape{3, 2, 2}, seed++);
    if (t == DType::BF16) {
      EXPECT_THROWS(DTypeError, io::save_npy(path, d), "[save_npy]", "bf16");
      EXPECT_FALSE(fs::exists(path));
      continue;
    }
    io::save_npy(path, d);
    EXPECT_EQ(read_all(path).size() % 64, d.bytes().size() % 64) << dtype_name(t);  // 64-aligned prefix
    EXPECT_TRUE(io::load_npy(path) == d) << dtype_name(t);
  }
}

std::string npy_file(char major, const std::string& dict, const std::string& data) {
  std::string s = std::string("\x93NUMPY", 6) + major + '\0';
  if (major == 1) s += std::string{static_cast<char>(dict.size() & 0xff), static_cast<char>(dict.size() >> 8)};
  else s += std::string{static_cast<char>(dict.size() & 0xff), static_cast<char>((dict.size() >> 8) & 0xff), '\0', '\0'};
  return s + dict + data;
}

TEST(Npy, ReadsVersion2AndNativeOrderDescr) {
  const std::string path = tmp_path("v2.npy");
  write_all(path, npy_file(2, "{'shape': (2,), 'fortran_order': False, 'descr': '=u2'}\n", "\x01\x02\x03\x04"));
  EXPECT_EQ(io::load_npy(path).to_vec<std::uint16_t>(), (std::vector<std::uint16_t>{0x0201, 0x0403}));
}

TEST(Npy, CorruptFilesAreFormatErrors) {
  const std::vector<Corrupt> cases = {
      {"magic", "PK\x03\x04 not npy at all", {"not a .npy file"}},
      {"version", npy_file(7, "{}", ""), {"unsupported version", "7"}},
      {"fortran", npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }\n", "abcd"), {"fortran_order True"}},
      {"big_endian", npy_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n", "abcd"), {"unsupported dtype", "'>f4'"}},
      {"object", npy_file(1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }\n", "abcdefgh"), {"unsupported dtype"}},
      {"short_data", npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", "abcd"),
       {"does not match the shape", "expected 8 bytes", "got 4"}},
      {"header_beyond", std::string("\x93NUMPY\x01\x00\xff\x00{}", 12), {"header length beyond the file"}},
      {"missing_key", npy_file(1, "{'descr': '<f4', 'shape': (1,), }\n", "abcd"), {"lacks"}},
      {"bad_shape", npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (a,), }\n", "abcd"), {"'shape'", "malformed"}},
      {"not_dict", npy_file(1, "[1, 2]\n", ""), {"not a dict"}},
  };
  for (const Corrupt& c : cases) {
    const std::string path = tmp_path(std::string(c.name) + ".npy");
    write_all(path, c.bytes);
    try {
      (void)io::load_npy(path);
      ADD_FAILURE() << c.name << ": no exception";
    } catch (const FormatError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("[load_npy]"), std::string::npos) << c.name << ": " << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
      for (const std::string& f : c.fragments) EXPECT_NE(msg.find(f), std::string::npos) << c.name << " lacks '" << f << "': " << msg;
    }
  }
}

// ---- hostile files (issue 30) -----------------------------------------------------------

// Expects `load` to throw E whose message starts with [op] and holds every fragment.
template <class E, class F>
void expect_load_error(const char* what, const std::string& op, F&& load, std::initializer_list<std::string> fragments) {
  EXPECT_TRUE(tt::throws_from<E>(op, load, fragments)) << what;
}

TEST(Safetensors, DeeplyNestedHeaderIsAFormatError) {
  // 100,000 nested arrays in a shape, in metadata, and as the whole header: each used to
  // overflow the stack in the JSON library.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"shape", R"({"a":{"dtype":"U8","shape":)" + deep + R"(,"data_offsets":[0,0]}})"},
      {"metadata", R"({"__metadata__":{"k":)" + deep + "}}"},
      {"whole", deep},
  };
  for (const auto& [name, header] : cases) {
    const std::string path = tmp_path(std::string("deep_") + name + ".safetensors");
    write_all(path, st_file(header, ""));
    expect_load_error<FormatError>(name, "load_safetensors", [&] { (void)io::load_safetensors(path); },
                                   {path, "nests JSON too deeply", "64"});
  }
  // Brackets inside strings do not count: a name made of 1,000 '[' loads.
  const std::string name(1000, '[');
  const std::string path = tmp_path("brackets_in_name.safetensors");
  write_all(path, st_file("{\"" + name + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "\x05"));
  EXPECT_EQ(io::load_safetensors(path).at(name).to_vec<std::uint8_t>(), std::vector<std::uint8_t>{5});
}

TEST(Safetensors, RepeatedNamesAndKeysAreRefused) {
  const std::string u8x4 = R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})";
  const std::vector<Corrupt> cases = {
      // The same name twice with the same offsets: the JSON library kept one and loaded it.
      {"same_offsets", st_file(R"({"a":)" + u8x4 + R"(,"a":)" + u8x4 + "}", "abcd"), {"duplicate", "'a'"}},
      {"other_offsets", st_file(R"({"a":)" + u8x4 + R"(,"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", "abcdefgh"),
       {"duplicate", "'a'"}},
      {"metadata_twice", st_file(R"({"__metadata__":{"k":"v"},"__metadata__":{"k":"w"}})", ""), {"duplicate", "'__metadata__'"}},
      {"key_in_entry", st_file(R"({"a":{"dtype":"F32","dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "abcd"),
       {"duplicate", "'dtype"}},
  };
  for (const Corrupt& c : cases) {
    const std::string path = tmp_path(std::string("dup_") + c.name + ".safetensors");
    write_all(path, c.bytes);
    expect_load_error<FormatError>(c.name, "load_safetensors", [&] { (void)io::load_safetensors(path); }, {path});
    for (const std::string& f : c.fragments)
      EXPECT_TRUE(tt::throws_with<FormatError>([&] { (void)io::load_safetensors(path); }, {f})) << c.name;
  }
  // Empty tensors share an offset (the writer gives consecutive empty tensors the same one).
  const std::string path = tmp_path("empties.safetensors");
  io::save_safetensors(path, {{"e1", TensorData::zeros(Shape{0}, DType::F32)}, {"e2", TensorData::zeros(Shape{2, 0}, DType::U8)},
                              {"x", TensorData::from(std::vector<std::uint8_t>{3})}});
  const io::SafetensorsFile f = io::load_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].first, "e1");
  EXPECT_EQ(f.tensors[1].first, "e2");
  EXPECT_EQ(f.tensors[1].second.shape(), Shape({2, 0}));
}

TEST(Safetensors, SavingANameOrMetadataThatIsNotUtf8IsAFormatError) {
  const TensorData x = TensorData::from(std::vector<float>{1.0f});
  const std::string path = tmp_path("utf8.safetensors");
  EXPECT_THROWS_FROM(FormatError, "save_safetensors", io::save_safetensors(path, {{std::string("w\xff"), x}}),
                     "tensor name", "not valid UTF-8", path);
  // A lone continuation byte, a truncated sequence and an encoded surrogate.
  for (const std::string& bad : {std::string("\x80"), std::string("ab\xc3"), std::string("\xed\xa0\x80")})
    EXPECT_THROWS_FROM(FormatError, "save_safetensors", io::save_safetensors(path, {{"ok", x}, {bad, x}}), "not valid UTF-8");
  EXPECT_THROWS_FROM(FormatError, "save_safetensors", io::save_safetensors(path, {{"w", x}}, {{std::string("k\xfe"), "v"}}),
                     "metadata key", "not valid UTF-8");
  EXPECT_THROWS_FROM(FormatError, "save_safetensors", io::save_safetensors(path, {{"w", x}}, {{"k", std::string("v\xc0\xaf")}}),
                     "metadata value", "not valid UTF-8");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // A refused save leaves an existing file as it was.
  const std::string existing = tmp_path("utf8_existing.safetensors");
  io::save_safetensors(existing, {{"old", x}});
  const std::string before = read_all(existing);
  EXPECT_THROWS_FROM(FormatError, "save_safetensors", io::save_safetensors(existing, {{std::string("w\xff"), x}}), "not valid UTF-8");
  EXPECT_EQ(read_all(existing), before);
  // Valid multi-byte names round-trip.
  const std::string name = "w\xc3\xa9ight\xe2\x82\xac";
  io::save_safetensors(path, {{name, x}}, {{"\xce\xbb", "\xf0\x9f\x98\x80"}});
  const io::SafetensorsFile f = io::load_safetensors(path);
  EXPECT_TRUE(f.contains(name));
  EXPECT_EQ(f.metadata.at("\xce\xbb"), "\xf0\x9f\x98\x80");
}

// A zero dim makes the tensor empty, but TensorData still refuses other dims whose product
// passes 2^63 - 1: the loader says so itself instead of letting [TensorData] through.
TEST(Safetensors, AnEmptyShapeWithHugeDimsIsTheLoadersFormatError) {
  const std::string path = tmp_path("huge_empty.safetensors");
  write_all(path, st_file(R"({"a":{"dtype":"U8","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}})", ""));
  EXPECT_THROWS_FROM(FormatError, "load_safetensors", io::load_safetensors(path), "tensor 'a'", "shape too large",
                     "[0, 1099511627776, 1099511627776]");
}

TEST(Npy, AnEmptyShapeWithHugeDimsIsTheLoadersFormatError) {
  const std::string path = tmp_path("huge_empty.npy");
  write_all(path, npy_file(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 1099511627776, 1099511627776), }\n", ""));
  EXPECT_THROWS_FROM(FormatError, "load_npy", io::load_npy(path), "shape too large", "[0, 1099511627776, 1099511627776]");
}

TEST(Npy, RepeatedHeaderKeysAreRefused) {
  const std::string path = tmp_path("dup.npy");
  write_all(path, npy_file(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), 'shape': (4,), }\n", "abcd"));
  EXPECT_THROWS_FROM(FormatError, "load_npy", io::load_npy(path), "duplicate header key", "'shape'");
}

// RAM + swap of this machine, read independently of the library.
std::uint64_t host_bytes() {
  struct sysinfo si {};
  if (::sysinfo(&si) != 0) return 0;
  return (static_cast<std::uint64_t>(si.totalram) + si.totalswap) * si.mem_unit;
}

// A sparse file of `size` bytes starting with `head`; false where the file system cannot
// hold one.
bool sparse_file(const std::string& path, const std::string& head, std::uint64_t size) {
  write_all(path, head);
  std::error_code ec;
  fs::resize_file(path, size, ec);
  return !ec;
}

// A file of more than 1 TiB (sparse: a few KiB on disk) whose header is right about its size:
// the loader refuses before allocating or reading the data, instead of reading until
// std::bad_alloc.
constexpr std::uint64_t kSparse = std::uint64_t{1} << 40;

TEST(Safetensors, SparseFileLargerThanHostMemoryIsATypedError) {
  if (host_bytes() == 0 || host_bytes() >= kSparse) GTEST_SKIP() << "host memory is not below 1 TiB";
  const std::string path = tmp_path("sparse.safetensors");
  std::string header = R"({"big":{"dtype":"U8","shape":[)" + std::to_string(kSparse) + R"(],"data_offsets":[0,)" +
                       std::to_string(kSparse) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  if (!sparse_file(path, le64(header.size()) + header, 8 + header.size() + kSparse)) GTEST_SKIP() << "no sparse files here";
  EXPECT_THROWS_FROM(ExecutionError, "load_safetensors", io::load_safetensors(path), path, "host memory",
                     std::to_string(kSparse));
  fs::remove(path);
}

TEST(Npy, SparseFileLargerThanHostMemoryIsATypedError) {
  if (host_bytes() == 0 || host_bytes() >= kSparse) GTEST_SKIP() << "host memory is not below 1 TiB";
  const std::string path = tmp_path("sparse.npy");
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(kSparse) + ",), }";
  dict.append(128 - 10 - dict.size() - 1, ' ');
  dict += '\n';
  if (!sparse_file(path, npy_file(1, dict, ""), 128 + kSparse)) GTEST_SKIP() << "no sparse files here";
  EXPECT_THROWS_FROM(ExecutionError, "load_npy", io::load_npy(path), path, "host memory", std::to_string(kSparse));
  fs::remove(path);
}

// A header that claims more than a (small) file holds fails on the sizes alone.
TEST(Safetensors, HugeDeclaredSizeInASmallFileIsAFormatError) {
  const std::string path = tmp_path("claims.safetensors");
  write_all(path, st_file(R"({"a":{"dtype":"F64","shape":[1342177280],"data_offsets":[0,10737418240]}})", "12345678"));
  EXPECT_THROWS_FROM(FormatError, "load_safetensors", io::load_safetensors(path), "beyond the file", "10737418240");
  const std::string npy = tmp_path("claims.npy");
  write_all(npy, npy_file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1342177280,), }\n", "12345678"));
  EXPECT_THROWS_FROM(FormatError, "load_npy", io::load_npy(npy), "expected 10737418240 bytes", "got 8");
}

}  // namespace
