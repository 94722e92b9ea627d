// Memory soak (issue 16): a fixed sequence of small ops, repeated, through the public
// API only; prints the process RSS (/proc/self/statm) and the device's memory_stats
// every --every iterations. With --max-growth-mb it fails (exit 1) when the RSS
// after --warmup iterations grows by more than that bound by the end of the loop:
// meson runs it so in the `slow` suite on every device.
//
//   soak [--device cpu|vulkan:0] [--iterations N] [--every K] [--warmup W] [--max-growth-mb M]
//        [--read-every R]   (only every R-th iteration reads back; the others only queue work)
//        [--dtypes]         (the read-back iterations cycle through 9 dtypes: more pipelines)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace {

using namespace tensor;

double rss_mb() {
  std::ifstream in("/proc/self/statm");
  unsigned long long pages = 0, resident = 0;
  in >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// One iteration: add, mul_scalar, exp, sum_dim, matmul, slice, cat, transpose + sub
// and two reads back (into_data), on [8, 8] f32 tensors. Returns a checksum so that
// nothing is optimised away and wrong values show.
float step(const Device& d, const std::vector<float>& av, const std::vector<float>& bv, bool read) {
  auto a = Tensor<2>::from_data(TensorData::from<float>(av, {8, 8}), d);
  auto b = Tensor<2>::from_data(TensorData::from<float>(bv, {8, 8}), d);
  if (!read) {  // queued work only: nothing waits for the device in this iteration
    auto r = Tensor<2>::random({8, 8}, Distribution::uniform(0, 1), d);
    auto y = ((a + b) * 0.01f).exp().sum_dim(1) + a.matmul(b).slice({Slice::all(), Slice::range(0, 1)}) + r.sum_dim(1);
    (void)y;
    return 0;
  }
  auto c = a + b;
  auto e = (c * 0.01f).exp();
  auto s = e.sum_dim(1);
  auto m = a.matmul(b);
  auto top = m.slice({Slice::range(0, 4), Slice::all()});
  auto both = cat(std::vector<Tensor<2>>{top, top}, 0);
  auto diff = both - m.transpose();
  const auto sv = s.into_data().to_vec<float>();
  const auto dv = diff.into_data().to_vec<float>();
  return sv[0] + dv[0];
}

// --dtypes: the same ops on one of these dtypes per iteration, in turn (float ones
// through Tensor<2>, int ones through Tensor<2, Int>): more pipelines, all of them
// compiled within the first cycle, so the RSS is flat after it.
const DType kCycle[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32,
                        DType::I64, DType::I16, DType::I8,   DType::U8};

float step_dtype(const Device& d, const std::vector<float>& av, const std::vector<float>& bv, DType dt) {
  auto a = Tensor<2>::from_data(TensorData::from<float>(av, {8, 8}), d);
  auto b = Tensor<2>::from_data(TensorData::from<float>(bv, {8, 8}), d);
  auto read = [](auto t) { return t.into_data().convert(DType::F32).template to_vec<float>()[0]; };
  if (is_float(dt)) {
    auto x = a.cast(dt), y = b.cast(dt);
    auto m = x.matmul(y);
    auto top = m.slice({Slice::range(0, 4), Slice::all()});
    return read(((x + y) * 0.01f).exp().sum_dim(1)) + read(cat(std::vector<Tensor<2>>{top, top}, 0) - m);
  }
  auto x = a.int_cast(dt), y = b.int_cast(dt);
  auto m = (x * 2).matmul(y);
  auto top = m.slice({Slice::range(0, 4), Slice::all()});
  return read((x + y).sum_dim(1)) + read(cat(std::vector<Tensor<2, Int>>{top, top}, 0) - m);
}

bool flag(int& i, int argc, char** argv, const char* name, std::string& out) {
  if (std::string(argv[i]) != name || i + 1 >= argc) return false;
  out = argv[++i];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu", v;
  long iterations = 2000, every = 500, warmup = 500, read_every = 1;
  double max_growth = 0;
  bool dtypes = false;
  for (int i = 1; i < argc; ++i) {
    if (flag(i, argc, argv, "--device", device)) continue;
    if (flag(i, argc, argv, "--iterations", v)) { iterations = std::atol(v.c_str()); continue; }
    if (flag(i, argc, argv, "--every", v)) { every = std::atol(v.c_str()); continue; }
    if (flag(i, argc, argv, "--warmup", v)) { warmup = std::atol(v.c_str()); continue; }
    if (std::string(argv[i]) == "--dtypes") { dtypes = true; continue; }
    if (flag(i, argc, argv, "--read-every", v)) { read_every = std::atol(v.c_str()); continue; }
    if (flag(i, argc, argv, "--max-growth-mb", v)) { max_growth = std::atof(v.c_str()); continue; }
    std::fprintf(stderr, "soak: unknown argument '%s'\n", argv[i]);
    return 2;
  }
  if (every <= 0) every = 1;
  try {
    const Device d = Device::parse(device);
    std::vector<float> av(64), bv(64);
    for (int i = 0; i < 64; ++i) {
      av[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
      bv[static_cast<std::size_t>(i)] = static_cast<float>(i % 5) * 0.5f;
    }
    if (read_every <= 0) read_every = 1;
    const float expect = step(d, av, bv, true);
    constexpr std::size_t kN = sizeof(kCycle) / sizeof(kCycle[0]);
    float expect_dt[kN]{};
    if (dtypes)
      for (std::size_t k = 0; k < kN; ++k) expect_dt[k] = step_dtype(d, av, bv, kCycle[k]);
    double at_warmup = 0;
    std::printf("soak on %s: %ld iterations, warm-up %ld\n", device.c_str(), iterations, warmup);
    std::printf("%10s %10s %14s %14s %14s\n", "iteration", "rss MiB", "in use", "reserved", "peak");
    for (long it = 1; it <= iterations; ++it) {
      const bool read = it % read_every == 0;
      const std::size_t k = static_cast<std::size_t>(it) % kN;
      const float got = dtypes && read ? step_dtype(d, av, bv, kCycle[k]) : step(d, av, bv, read);
      if (read && got != (dtypes ? expect_dt[k] : expect)) {
        std::fprintf(stderr, "soak: iteration %ld gave %g, the first gave %g\n", it, static_cast<double>(got),
                     static_cast<double>(expect));
        return 1;
      }
      if (it == warmup) at_warmup = rss_mb();
      if (it % every == 0 || it == iterations) {
        const MemoryStats m = d.memory_stats();
        std::printf("%10ld %10.1f %14llu %14llu %14llu\n", it, rss_mb(), static_cast<unsigned long long>(m.bytes_in_use),
                    static_cast<unsigned long long>(m.bytes_reserved), static_cast<unsigned long long>(m.peak_bytes_in_use));
        std::fflush(stdout);
      }
    }
    const double end = rss_mb();
    if (max_growth > 0 && warmup < iterations) {
      const double growth = end - at_warmup;
      std::printf("rss after warm-up %.1f MiB, at the end %.1f MiB: growth %.1f MiB (bound %.1f)\n", at_warmup, end, growth,
                  max_growth);
      if (growth > max_growth) {
        std::fprintf(stderr, "soak: RSS grew by %.1f MiB after warm-up; expected at most %.1f\n", growth, max_growth);
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak: %s\n", e.what());
    return 1;
  }
  return 0;
}
