// What every benchmark prints its figures with: the median of its timings and the load
// average it ran under (these machines are shared; a figure without its load means little).
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tensor_bench {

// The median (the mean of the middle two for an even count); v is taken by value and sorted.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (n == 0) return 0.0;
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A duration in seconds as "1.25 ms", "3.4 us" or "72 ns".
inline std::string fmt_time(double s) {
  char b[32];
  if (s >= 1e-3) std::snprintf(b, sizeof b, "%.2f ms", s * 1e3);
  else if (s >= 1e-6) std::snprintf(b, sizeof b, "%.1f us", s * 1e6);
  else std::snprintf(b, sizeof b, "%.0f ns", s * 1e9);
  return b;
}

// "/proc/loadavg"'s three averages ("0.52 0.61 0.70"), or "unknown".
inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return f ? a + " " + b + " " + c : "unknown";
}

}  // namespace tensor_bench
