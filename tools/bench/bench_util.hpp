// What every benchmark prints its figures with: the median of its timings and the load
// average it ran under (these machines are shared; a figure without its load means little).
#pragma once

#include <algorithm>
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

// "/proc/loadavg"'s three averages ("0.52 0.61 0.70"), or "unknown".
inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return f ? a + " " + b + " " + c : "unknown";
}

}  // namespace tensor_bench
