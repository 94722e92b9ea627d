// tensorctl check [--device D] [--op PATTERN] [--dtype T] [--seed S]: every op on D
// against the CPU backend on random inputs and non-contiguous views; one line per
// case, then "N passed, M failed, K unsupported"; exit 1 on any failure.
#include <cstdio>
#include <iostream>

#include "dispatch/dispatch.hpp"
#include "tools/op_check.hpp"
#include "tools/tensorctl.hpp"

namespace tensorctl {

int run_check(Args args) {
  CheckOptions opt;
  opt.device = tensor::Device::default_device().id();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--device" && has_value) {
      opt.device = tensor::dispatch::parse_device(args[++i]);
    } else if (a == "--op" && has_value) {
      opt.op_pattern = args[++i];
    } else if (a == "--dtype" && has_value) {
      const std::string t = args[++i];
      bool found = false;
      for (int k = 0; k < tensor::kDTypeCount; ++k)
        if (tensor::dtype_name(static_cast<tensor::DType>(k)) == t) {
          opt.dtype = static_cast<tensor::DType>(k);
          found = true;
        }
      if (!found) {
        std::cerr << "tensorctl check: unknown dtype '" << t << "' (f64 f32 f16 bf16 i64 ... u8 bool)\n";
        return kExitUsage;
      }
    } else if (a == "--seed" && has_value) {
      opt.seed = std::stoull(args[++i]);
    } else {
      std::cerr << "usage: tensorctl check [--device D] [--op PATTERN] [--dtype T] [--seed S]\n";
      return kExitUsage;
    }
  }
  std::printf("checking %s (%s) against cpu, seed %llu\n", tensor::dispatch::device_string(opt.device).c_str(),
              tensor::dispatch::backend_name(opt.device).c_str(), static_cast<unsigned long long>(opt.seed));
  std::printf("%-26s %-9s %-22s %10s %10s  %s\n", "op", "dtype", "layout", "max_abs", "max_rel", "result");
  const CheckSummary s = run_checks(opt, [](const CheckResult& r) {
    const char* st = r.status == CheckStatus::Pass ? "PASS" : r.status == CheckStatus::Fail ? "FAIL" : "UNSUPPORTED";
    std::printf("%-26s %-9s %-22s %10.3g %10.3g  %s%s%s\n", r.op.c_str(), r.dtype.c_str(), r.layout.c_str(), r.max_abs,
                r.max_rel, st, r.note.empty() ? "" : "  ", r.note.c_str());
  });
  std::printf("%d passed, %d failed, %d unsupported\n", s.passed, s.failed, s.unsupported);
  return s.failed ? kExitFailure : kExitOk;
}

}  // namespace tensorctl
