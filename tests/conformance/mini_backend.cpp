// The mini backend: primitives wrap a CPU primitive; each required entry unwraps
// its tensor arguments, calls the CPU kernel, and wraps the results. The adapter
// is generated per op from the entry's family signature, so no list is kept here.
#include "mini_backend.hpp"

#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "dispatch/backend.hpp"

namespace tt::mini {
namespace {

using namespace tensor;
using namespace tensor::dispatch;

constexpr DeviceId kMini{kMiniDeviceType, 0};
constexpr DeviceId kCpu{kCpuDeviceType, 0};

class MiniTensor final : public Primitive {
 public:
  explicit MiniTensor(Prim inner) : Primitive(inner->dtype(), inner->shape(), kMini), inner_(std::move(inner)) {}
  bool can_mut() const override { return unique_ref() && inner_->can_mut(); }
  Prim inner_;
};

Prim wrap(Prim p) { return Prim::adopt(new MiniTensor(std::move(p))); }
Prim unwrap(Prim p) {
  auto& m = static_cast<MiniTensor&>(*p);
  return p->unique_ref() ? std::move(m.inner_) : m.inner_;  // a unique wrapper passes ownership on
}

const Backend& cpu() {
  static const std::unique_ptr<Backend> b = cpu::make_cpu_backend();  // native CPU entries only
  return *b;
}

// Argument and result conversion between mini and CPU primitives.
template <class T> struct Conv {
  template <class U> static decltype(auto) in(U&& v) { return std::forward<U>(v); }
  template <class U> static decltype(auto) out(U&& v) { return std::forward<U>(v); }
};
template <> struct Conv<Prim> {
  static Prim in(Prim p) { return unwrap(std::move(p)); }
  static Prim out(Prim p) { return wrap(std::move(p)); }
};
template <> struct Conv<const Prim&> {
  static Prim in(const Prim& p) { return static_cast<const MiniTensor&>(*p).inner_; }
};
template <> struct Conv<PrimPair> {
  static PrimPair out(PrimPair p) { return {wrap(std::move(p.first)), wrap(std::move(p.second))}; }
};
template <> struct Conv<std::vector<Prim>> {
  static std::vector<Prim> in(std::vector<Prim> v) {
    for (Prim& p : v) p = unwrap(std::move(p));
    return v;
  }
};
template <> struct Conv<DeviceId> {
  static DeviceId in(DeviceId) { return kCpu; }
};

template <OpCode op, class Fn> struct Adapter;
template <OpCode op, class R, class... A>
struct Adapter<op, R (*)(A...)> {
  static R call(A... args) {
    const auto fn = cpu().get<op_family(op)>(op);
    if constexpr (std::is_void_v<R>) fn(Conv<A>::in(std::forward<A>(args))...);
    else return Conv<R>::out(fn(Conv<A>::in(std::forward<A>(args))...));
  }
};

template <OpCode op>
void set_if_required(Backend& b) {
  if constexpr (op_info(op).policy == Policy::Req) {
    if (cpu().has(op)) b.set<op>(&Adapter<op, FamilyFn<op_family(op)>>::call);
  }
}

template <std::size_t... I>
void set_all(Backend& b, std::index_sequence<I...>) {
  // Initializers, not a fold: clang limits a fold's nesting to 256 operands (kOpCount is more).
  [[maybe_unused]] const int each[] = {(set_if_required<static_cast<OpCode>(I)>(b), 0)...};
}

std::string name(DeviceId) { return "mini"; }
void seed(DeviceId, std::uint64_t s) { cpu().get<DeviceOp::seed>()(kCpu, s); }
void flush(DeviceId) {}
// The cpu's dtypes, but no integer path for QFloat: every quant row is a default here.
DTypeUsageSet usage(DeviceId, DType t) {
  return t == DType::QFloat ? DTypeUsageSet{} : cpu().get<DeviceOp::dtype_usage>()(kCpu, t);
}
std::size_t count() { return 1; }
DeviceSettings settings(DeviceId) { return cpu().get<DeviceOp::default_settings>()(kCpu); }
void assign(DeviceId, const Prim& dst, const Prim& src) {
  cpu().get<DeviceOp::assign>()(kCpu, static_cast<const MiniTensor&>(*dst).inner_, static_cast<const MiniTensor&>(*src).inner_);
}

}  // namespace

tensor::Device device() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto b = std::make_unique<Backend>("mini", kMiniDeviceType);
    set_all(*b, std::make_index_sequence<kOpCount>());
    b->set<DeviceOp::name>(&name);
    b->set<DeviceOp::seed>(&seed);
    b->set<DeviceOp::flush>(&flush);
    b->set<DeviceOp::dtype_usage>(&usage);
    b->set<DeviceOp::device_count>(&count);
    b->set<DeviceOp::default_settings>(&settings);
    b->set<DeviceOp::assign>(&assign);
    Registry::instance().register_backend(std::move(b));
  });
  return tensor::Device(kMini);
}

}  // namespace tt::mini
