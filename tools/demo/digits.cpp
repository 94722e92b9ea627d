// The digits demo: CSV loading (zlib), a deterministic split, and a two-layer
// network trained with hand-written gradients on any libtensor device.
#include "digits.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

namespace digits {

using tensor::Bool;
using tensor::Device;
using tensor::DType;
using tensor::Int;
using tensor::Tensor;
using tensor::TensorData;

namespace {

std::string at(const std::string& path, std::size_t line) { return path + ":" + std::to_string(line) + ": "; }

// Parses one CSV line of integers into `out`; returns false with a reason otherwise.
bool parse_row(const char* s, std::vector<long>& out, std::string& why) {
  out.clear();
  const char* p = s;
  for (;;) {
    while (*p == ' ' || *p == '\t') ++p;
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(p, &end, 10);
    if (end == p || errno != 0) {
      why = std::string("expected an integer at column ") + std::to_string(out.size() + 1) + "; got '" +
            std::string(p, std::min<std::size_t>(std::strlen(p), 12)) + "'";
      return false;
    }
    out.push_back(v);
    p = end;
    while (*p == ' ' || *p == '\t') ++p;
    if (*p == ',') { ++p; continue; }
    if (*p == '\0' || *p == '\n' || *p == '\r') return true;
    why = std::string("expected ',' or end of line after column ") + std::to_string(out.size()) + "; got '" + *p + "'";
    return false;
  }
}

}  // namespace

Dataset load_csv(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw DataError(path + ": cannot open the digits data (" + std::strerror(errno) + ")");
  struct Closer { gzFile f; ~Closer() { gzclose(f); } } closer{f};
  Dataset d;
  std::vector<char> buf(1 << 16);
  std::vector<long> row;
  std::size_t line = 0;
  while (gzgets(f, buf.data(), static_cast<int>(buf.size()))) {
    ++line;
    const std::size_t len = std::strlen(buf.data());
    if (len + 1 == buf.size() && buf[len - 1] != '\n') throw DataError(at(path, line) + "line too long");
    if (buf[0] == '\n' || buf[0] == '\r' || buf[0] == '\0') continue;  // blank lines are allowed
    std::string why;
    if (!parse_row(buf.data(), row, why)) throw DataError(at(path, line) + why);
    if (row.size() < 2) throw DataError(at(path, line) + "expected pixel columns and a label; got " + std::to_string(row.size()) + " column(s)");
    if (d.features == 0) d.features = row.size() - 1;
    if (row.size() != d.features + 1)
      throw DataError(at(path, line) + "expected " + std::to_string(d.features + 1) + " columns; got " + std::to_string(row.size()));
    for (std::size_t i = 0; i < d.features; ++i) {
      if (row[i] < 0 || row[i] > 16)
        throw DataError(at(path, line) + "pixel " + std::to_string(i) + " out of range; expected 0..16; got " + std::to_string(row[i]));
      d.pixels.push_back(static_cast<float>(row[i]));
    }
    const long label = row.back();
    if (label < 0 || label > 9) throw DataError(at(path, line) + "label out of range; expected 0..9; got " + std::to_string(label));
    d.labels.push_back(static_cast<std::int32_t>(label));
    ++d.rows;
  }
  int err = 0;
  const char* msg = gzerror(f, &err);
  if (err != Z_OK && err != Z_STREAM_END) throw DataError(path + ": read error after line " + std::to_string(line) + ": " + msg);
  if (d.rows == 0) throw DataError(path + ": no data rows");
  return d;
}

std::string find_data(const std::string& explicit_path) {
  namespace fs = std::filesystem;
  if (!explicit_path.empty()) return explicit_path;  // an explicit path is used as given (errors name it)
  if (const char* env = std::getenv("TENSOR_DIGITS"); env && *env) return env;
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = ec ? fs::current_path() : exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    candidates.push_back(dir / ".cache" / "digits" / "digits.csv.gz");
    if (dir == dir.root_path()) break;
  }
  candidates.push_back(fs::current_path() / ".cache" / "digits" / "digits.csv.gz");
  candidates.push_back("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz");
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c.string();
  return {};
}

Split split(const Dataset& d, double train_fraction, std::uint64_t seed) {
  std::vector<std::size_t> order(d.rows);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 rng(seed);
  // Fisher-Yates with our own draw, so the split is the same on every standard library.
  for (std::size_t i = d.rows; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  const auto n_train = static_cast<std::size_t>(std::llround(train_fraction * static_cast<double>(d.rows)));
  Split s;
  for (Dataset* part : {&s.train, &s.test}) part->features = d.features;
  for (std::size_t k = 0; k < d.rows; ++k) {
    Dataset& part = k < n_train ? s.train : s.test;
    const std::size_t r = order[k];
    part.pixels.insert(part.pixels.end(), d.pixels.begin() + static_cast<std::ptrdiff_t>(r * d.features),
                       d.pixels.begin() + static_cast<std::ptrdiff_t>((r + 1) * d.features));
    part.labels.push_back(d.labels[r]);
    ++part.rows;
  }
  return s;
}

namespace {

constexpr std::size_t kClasses = 10;

float read_scalar(const Tensor<1>& t) { return t.into_data().convert(DType::F32).to_vec<float>()[0]; }

// Pixels scaled to [0, 1] as a [rows, features] tensor; labels as [rows, 1] ints.
Tensor<2> upload_pixels(const std::vector<float>& px, std::size_t rows, std::size_t features, Device dev) {
  std::vector<float> scaled(px.size());
  for (std::size_t i = 0; i < px.size(); ++i) scaled[i] = px[i] / 16.0f;
  return Tensor<2>::from_data(TensorData::from<float>(scaled, {rows, features}), dev);
}
Tensor<2, Int> upload_labels(const std::vector<std::int32_t>& labels, Device dev) {
  return Tensor<2, Int>::from_data(TensorData::from<std::int32_t>(labels, {labels.size(), 1}), dev);
}
Tensor<2> one_hot(const Tensor<2, Int>& labels, Device dev) {
  // labels [B,1] == classes [1,10] -> Bool [B,10] -> float
  const auto classes = Tensor<1, Int>::arange(0, kClasses, dev).reshape<2>({1, static_cast<std::int64_t>(kClasses)});
  return labels.equal(classes).float_();
}

struct Net {
  Tensor<2> w1, b1, w2, b2;

  Tensor<2> hidden_pre(const Tensor<2>& x) const { return x.matmul(w1) + b1; }  // b1 [1,H] broadcasts
  Tensor<2> logits(const Tensor<2>& a1) const { return a1.matmul(w2) + b2; }

  // Fraction of rows whose arg-max logit equals the label.
  double accuracy(const Tensor<2>& x, const Tensor<2, Int>& y) const {
    auto pred = logits(tensor::activation::relu(hidden_pre(x))).argmax(1);
    auto hits = pred.equal(y).float_().sum();
    return read_scalar(hits) / static_cast<double>(x.dims()[0]);
  }
};

// Host-side initialisation, so every device starts from the same weights.
Tensor<2> uniform_init(std::size_t rows, std::size_t cols, float bound, std::mt19937_64& rng, Device dev) {
  std::vector<float> w(rows * cols);
  for (float& v : w) v = bound * (2.0f * static_cast<float>(rng() >> 11) / 9007199254740992.0f - 1.0f);
  return Tensor<2>::from_data(TensorData::from<float>(w, {rows, cols}), dev);
}

class Progress {
 public:
  Progress(bool enabled, std::size_t epochs, std::size_t batches)
      : tty_(enabled && isatty(STDOUT_FILENO)), enabled_(enabled), epochs_(epochs), batches_(batches) {}
  void update(std::size_t epoch, std::size_t done, double loss, double rate) const {
    if (!tty_) return;
    const std::size_t width = 30;
    const std::size_t filled = batches_ ? done * width / batches_ : width;
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::printf("\repoch %3zu/%zu [%s] %3zu/%zu batches  loss %.4f  %8.0f samples/s", epoch, epochs_, bar.c_str(), done,
                batches_, loss, rate);
    std::fflush(stdout);
  }
  void finish(const EpochStats& s) const {
    if (!enabled_) return;
    if (tty_) std::printf("\r\033[K");
    std::printf("epoch %3zu/%zu  loss %.4f  %.3f s  %.0f samples/s\n", s.epoch, epochs_, s.loss, s.seconds,
                s.samples_per_second);
    std::fflush(stdout);
  }

 private:
  bool tty_, enabled_;
  std::size_t epochs_, batches_;
};

}  // namespace

Result train(const Split& data, const Options& opt, Device dev) {
  using clock = std::chrono::steady_clock;
  const std::size_t f = data.train.features;
  const std::size_t h = opt.hidden;
  std::mt19937_64 rng(opt.seed);
  Net net{uniform_init(f, h, std::sqrt(6.0f / static_cast<float>(f)), rng, dev), Tensor<2>::zeros({1, h}, dev),
          uniform_init(h, kClasses, std::sqrt(6.0f / static_cast<float>(h)), rng, dev), Tensor<2>::zeros({1, kClasses}, dev)};

  const std::size_t n = data.train.rows;
  const std::size_t batches = (n + opt.batch - 1) / opt.batch;
  Progress progress(opt.progress, opt.epochs, batches);
  Result result;
  result.backend = dev.backend_name();
  const float lr = opt.learning_rate;

  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::vector<float> px(n * f);
  std::vector<std::int32_t> lb(n);
  for (std::size_t epoch = 1; epoch <= opt.epochs; ++epoch) {
    const auto t0 = clock::now();
    // Reshuffle on the host each epoch (deterministic, device-independent), upload once.
    for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
    for (std::size_t k = 0; k < n; ++k) {
      std::copy_n(data.train.pixels.begin() + static_cast<std::ptrdiff_t>(order[k] * f), f, px.begin() + static_cast<std::ptrdiff_t>(k * f));
      lb[k] = data.train.labels[order[k]];
    }
    const Tensor<2> x_all = upload_pixels(px, n, f, dev);
    const Tensor<2> y_all = one_hot(upload_labels(lb, dev), dev);

    Tensor<1> loss_sum = Tensor<1>::zeros({1}, dev);
    double shown_loss = 0.0;
    for (std::size_t b = 0; b < batches; ++b) {
      const auto lo = static_cast<std::int64_t>(b * opt.batch);
      const auto hi = static_cast<std::int64_t>(std::min(n, (b + 1) * opt.batch));
      const Tensor<2> x = x_all.slice({{lo, hi}});
      const Tensor<2> y = y_all.slice({{lo, hi}});
      const auto bs = static_cast<float>(hi - lo);

      // Forward.
      const Tensor<2> z1 = net.hidden_pre(x);
      const Tensor<2> a1 = tensor::activation::relu(z1);
      const Tensor<2> z2 = net.logits(a1);
      const Tensor<2> logp = tensor::activation::log_softmax(z2, 1);
      const Tensor<1> loss = (logp * y).sum() * (-1.0f / bs);
      loss_sum = loss_sum + loss;

      // Backward: d(loss)/d(z2) = (softmax(z2) - y) / batch.
      const Tensor<2> dz2 = (logp.exp() - y) * (1.0f / bs);
      const Tensor<2> dw2 = a1.transpose().matmul(dz2);
      const Tensor<2> db2 = dz2.sum_dim(0);
      const Tensor<2> da1 = dz2.matmul(net.w2.transpose());
      const Tensor<2> dz1 = da1.mask_fill(z1.lower_equal_elem(0.0f), 0.0f);
      const Tensor<2> dw1 = x.transpose().matmul(dz1);
      const Tensor<2> db1 = dz1.sum_dim(0);

      // SGD step (the old weights are uniquely held here, so these run in place).
      net.w1 = std::move(net.w1) - dw1 * lr;
      net.b1 = std::move(net.b1) - db1 * lr;
      net.w2 = std::move(net.w2) - dw2 * lr;
      net.b2 = std::move(net.b2) - db2 * lr;

      if (opt.progress && isatty(STDOUT_FILENO)) {
        shown_loss = read_scalar(loss);
        const double secs = std::chrono::duration<double>(clock::now() - t0).count();
        progress.update(epoch, b + 1, shown_loss, static_cast<double>(hi) / std::max(secs, 1e-9));
      }
    }
    dev.sync();
    EpochStats s;
    s.epoch = epoch;
    s.loss = read_scalar(loss_sum) / static_cast<double>(batches);
    s.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    s.samples_per_second = static_cast<double>(n) / std::max(s.seconds, 1e-9);
    progress.finish(s);
    result.epochs.push_back(s);
  }

  const Tensor<2> xtr = upload_pixels(data.train.pixels, data.train.rows, f, dev);
  const Tensor<2> xte = upload_pixels(data.test.pixels, data.test.rows, f, dev);
  result.train_accuracy = net.accuracy(xtr, upload_labels(data.train.labels, dev));
  result.test_accuracy = net.accuracy(xte, upload_labels(data.test.labels, dev));
  double total = 0.0;
  for (const auto& e : result.epochs) total += e.seconds;
  result.mean_epoch_seconds = result.epochs.empty() ? 0.0 : total / static_cast<double>(result.epochs.size());
  result.final_loss = result.epochs.empty() ? 0.0 : result.epochs.back().loss;
  return result;
}

namespace {

void usage() {
  std::printf(
      "usage: tensorctl demo [--data PATH] [--epochs N] [--batch N] [--hidden N] [--lr X] [--seed N] [--quiet]\n"
      "Trains a two-layer network on the UCI digits (1,797 8x8 images) on TENSOR_DEVICE (default cpu).\n"
      "Data: --data, else $TENSOR_DIGITS, else .cache/digits/digits.csv.gz (scripts/fetch-digits.sh), else\n"
      "python3-sklearn's copy.\n");
}

bool parse_count(const char* s, std::size_t& out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || *end != '\0' || v == 0 || v > 1000000) return false;
  out = static_cast<std::size_t>(v);
  return true;
}

}  // namespace

int run(int argc, char** argv) {
  Options opt;
  std::string data_path;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) { std::fprintf(stderr, "demo: %s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    bool ok = true;
    if (a == "--data") data_path = value();
    else if (a == "--epochs") ok = parse_count(value(), opt.epochs);
    else if (a == "--batch") ok = parse_count(value(), opt.batch);
    else if (a == "--hidden") ok = parse_count(value(), opt.hidden);
    else if (a == "--lr") { char* e = nullptr; const char* v = value(); opt.learning_rate = std::strtof(v, &e); ok = e != v && *e == '\0' && opt.learning_rate > 0; }
    else if (a == "--seed") { char* e = nullptr; const char* v = value(); opt.seed = std::strtoull(v, &e, 10); ok = e != v && *e == '\0'; }
    else if (a == "--quiet") opt.progress = false;
    else if (a == "-h" || a == "--help") { usage(); return 0; }
    else { std::fprintf(stderr, "demo: unknown argument '%s'\n", a.c_str()); usage(); return 2; }
    if (!ok) { std::fprintf(stderr, "demo: bad value for %s\n", a.c_str()); return 2; }
  }
  try {
    const std::string path = find_data(data_path);
    if (path.empty()) {
      std::fprintf(stderr, "demo: no digits data found; run scripts/fetch-digits.sh or pass --data PATH\n");
      return 1;
    }
    const Dataset all = load_csv(path);
    const Split s = split(all, 0.8, opt.seed);
    const Device dev = Device::default_device();
    std::printf("digits: %zu images x %zu pixels from %s\n", all.rows, all.features, path.c_str());
    std::printf("train %zu / test %zu, %zu-%zu-%zu network, batch %zu, lr %g, %zu epochs on %s\n", s.train.rows, s.test.rows,
                all.features, opt.hidden, kClasses, opt.batch, static_cast<double>(opt.learning_rate), opt.epochs,
                dev.backend_name().c_str());
    const Result r = train(s, opt, dev);
    std::printf("test accuracy %.2f %%  (train %.2f %%)  final loss %.4f  %.3f s/epoch  backend %s\n", 100.0 * r.test_accuracy,
                100.0 * r.train_accuracy, r.final_loss, r.mean_epoch_seconds, r.backend.c_str());
    return 0;
  } catch (const DataError& e) {
    std::fprintf(stderr, "demo: %s\n", e.what());
    return 1;
  } catch (const tensor::Error& e) {
    std::fprintf(stderr, "demo: %s\n", e.what());
    return 1;
  }
}

}  // namespace digits
