// The digits demo: the CSV loader on good and malformed fixtures, the split, and
// a short training run that must reach a fixed accuracy on every device present.
#include "digits.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name, const std::string& text, bool gzip = false) {
  const fs::path dir = fs::temp_directory_path() / ("digits_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  if (gzip) {
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  } else {
    std::ofstream(p) << text;
  }
  return p;
}

std::string row(int first, int label) {
  std::string s = std::to_string(first);
  // append, not "," + std::string: GCC 12 at -O3 warns falsely (-Wrestrict) on the latter.
  for (int i = 1; i < 64; ++i) s.append(",").append(std::to_string(i % 17));
  return s.append(",").append(std::to_string(label)).append("\n");
}

template <class F>
std::string data_error(F&& f) {
  try {
    f();
  } catch (const digits::DataError& e) {
    return e.what();
  }
  return "no DataError";
}

TEST(DigitsLoader, ReadsPlainAndGzipRows) {
  const std::string text = row(0, 3) + row(16, 9) + "\n" + row(5, 0);
  for (bool gz : {false, true}) {
    const auto d = digits::load_csv(fixture(gz ? "good.csv.gz" : "good.csv", text, gz));
    ASSERT_EQ(d.rows, 3u);
    EXPECT_EQ(d.features, 64u);
    EXPECT_EQ(d.labels, (std::vector<std::int32_t>{3, 9, 0}));
    EXPECT_EQ(d.pixels[0], 0.0f);
    EXPECT_EQ(d.pixels[64], 16.0f);
    EXPECT_EQ(d.pixels[64 + 5], 5.0f);
    EXPECT_EQ(d.pixels.size(), 3u * 64u);
  }
}

TEST(DigitsLoader, MalformedRowsNameThePathAndLine) {
  const std::string good = row(1, 1);
  struct Case { std::string name, text, fragment; };
  const Case cases[] = {
      {"short.csv", good + "1,2,3\n", ":2: expected 65 columns; got 3"},
      {"word.csv", good + good + "1,x,3\n", ":3: expected an integer at column 2"},
      {"pixel.csv", row(17, 1), ":1: pixel 0 out of range; expected 0..16; got 17"},
      {"label.csv", good + row(0, 12), ":2: label out of range; expected 0..9; got 12"},
      {"sep.csv", "1;2\n", ":1: expected ',' or end of line"},
      {"empty.csv", "\n\n", "no data rows"},
  };
  for (const auto& c : cases) {
    const fs::path p = fixture(c.name, c.text);
    const std::string msg = data_error([&] { digits::load_csv(p.string()); });
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.fragment), std::string::npos) << c.name << ": " << msg;
  }
}

TEST(DigitsLoader, MissingFileIsAnErrorNamingThePath) {
  const std::string msg = data_error([] { digits::load_csv("/nonexistent/digits.csv.gz"); });
  EXPECT_NE(msg.find("/nonexistent/digits.csv.gz"), std::string::npos) << msg;
}

TEST(DigitsSplit, IsDeterministicAndPartitionsTheRows) {
  digits::Dataset d;
  d.features = 1;
  for (int i = 0; i < 100; ++i) {
    d.pixels.push_back(static_cast<float>(i % 17));
    d.labels.push_back(i % 10);
    ++d.rows;
  }
  // Tag each row through its (pixel, label) pair is not unique; use the order of labels+pixels.
  const auto a = digits::split(d, 0.8, 7);
  const auto b = digits::split(d, 0.8, 7);
  const auto c = digits::split(d, 0.8, 8);
  EXPECT_EQ(a.train.rows, 80u);
  EXPECT_EQ(a.test.rows, 20u);
  EXPECT_EQ(a.train.labels, b.train.labels);
  EXPECT_EQ(a.train.pixels, b.train.pixels);
  EXPECT_NE(a.train.labels, c.train.labels);
  std::multiset<std::int32_t> all(d.labels.begin(), d.labels.end()), parts;
  parts.insert(a.train.labels.begin(), a.train.labels.end());
  parts.insert(a.test.labels.begin(), a.test.labels.end());
  EXPECT_EQ(all, parts);
}

// A short run on the real data must beat a fixed bar on every device present,
// and the same seed must give the same accuracy on every device (within 1 %).
TEST(DigitsTraining, ShortRunReachesTheAccuracyBarOnEveryDevice) {
  const std::string path = digits::find_data("");
  if (path.empty()) GTEST_FAIL() << "digits data missing: run scripts/fetch-digits.sh (the bootstrap does)";
  const auto s = digits::split(digits::load_csv(path), 0.8, 42);
  digits::Options opt;
  opt.epochs = 15;
  opt.progress = false;
  std::vector<double> acc;
  for (const tensor::Device& dev : tensor::Device::available()) {
    const auto r = digits::train(s, opt, dev);
    EXPECT_GE(r.test_accuracy, 0.95) << dev.to_string();
    EXPECT_EQ(r.epochs.size(), 15u);
    EXPECT_LT(r.epochs.back().loss, r.epochs.front().loss) << dev.to_string();
    acc.push_back(r.test_accuracy);
    std::printf("%s: test accuracy %.4f\n", dev.to_string().c_str(), r.test_accuracy);
  }
  ASSERT_FALSE(acc.empty());
  const auto [lo, hi] = std::minmax_element(acc.begin(), acc.end());
  EXPECT_LE(*hi - *lo, 0.01) << "devices disagree on the same seed";
}

}  // namespace
