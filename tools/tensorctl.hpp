// tensorctl's shared pieces: the subcommand signature and a plain aligned text table.
#pragma once

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tensorctl {

// Arguments after the subcommand name (argv[2..]).
using Args = std::span<const std::string>;

// A subcommand returns the process exit status: 0 ok, 1 failure, 2 usage error.
using CommandFn = int (*)(Args args);

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Subcommands (one file each: tensorctl_<name>.cpp).
int run_info(Args args);
int run_ops(Args args);
int run_check(Args args);
int run_demo(Args args);
int run_bench(Args args);
int run_train(Args args);
int run_eval(Args args);

// Columns padded to their widest cell, separated by two spaces, indented.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::size_t indent = 2)
      : header_(std::move(header)), indent_(indent) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }

  // `with_header` false prints key/value style tables without a title row.
  void print(std::ostream& os, bool with_header = true) const {
    std::vector<std::size_t> w(header_.size(), 0);
    auto widen = [&](const std::vector<std::string>& r) {
      for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
    };
    widen(header_);
    for (const auto& r : rows_) widen(r);
    auto line = [&](const std::vector<std::string>& r) {
      std::string s(indent_, ' ');
      for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) {
        s += r[i];
        if (i + 1 < r.size()) s.append(w[i] - r[i].size() + 2, ' ');
      }
      os << s << '\n';
    };
    if (with_header) line(header_);
    for (const auto& r : rows_) line(r);
  }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::size_t indent_;
};

}  // namespace tensorctl
