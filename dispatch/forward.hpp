// The one invocation path's shared steps, used by every family's forwarders in
// dispatch/rules/: kind and argument validation -> output metadata from the family's shape
// rule (shape_rules.hpp) -> hooks (hooks.hpp, invoke) -> backend entry -> wrap. An op the
// backend need not run (an identity transpose, a same-dtype cast) still passes the hooks;
// its body returns the input.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <span>
#include <tuple>
#include <type_traits>
#include <vector>
#include <string>
#include <utility>

#include "dispatch/autodiff.hpp"
#include "dispatch/dispatch.hpp"
#include "lib/core/element.hpp"
#include "dispatch/hooks.hpp"
#include "dispatch/settings.hpp"
#include "lib/core/shape_rules.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::fwd {

template <Family F>
__attribute__((always_inline)) inline FamilyFn<F> entry(OpCode op, DeviceId device) {
  if (op_family(op) != F)
    throw Error(fmt::format("[{}] op used through the wrong family; expected {}; got {}", op_name(op),
                            family_name(op_family(op)), family_name(F)));
  const Backend& b = backend_of(device);
  set_current_op(op);
  auto fn = b.get<F>(op);
  if (!fn) throw_not_implemented(op, b);
  return fn;
}

// Quantized operands (dispatch/quant.cpp): a quantized tensor dequantized to `to` (a float
// op's other operand's dtype, burn's rule for mixed operands), and a Flow row's output
// metadata, a float tensor of the device's default float dtype under QuantPropagation::Inhibit.
DispatchTensor dequantize_operand(const DispatchTensor& q, DType to);
void flow_meta(OutMeta& m, DeviceId device);

// Ops that only move or view data need Storage, not Arithmetic (op table: storage_only).
inline bool is_layout_op(OpCode op) { return op_info(op).storage_only; }

inline void check_usage(OpCode op, const DispatchTensor& t) {
  if (op_info(op).qfloat_in) [[unlikely]] return check_quantized(op, t);
  if (is_layout_op(op)) check_storage(op, t.device, t.dtype());
  else check_arithmetic(op, t.device, t.dtype());
}

// Kind check + dtype capability check for the first operand.
inline void check_first(OpCode op, const DispatchTensor& t) {
  check_kind(op, t);
  check_usage(op, t);
}

inline DType bool_out(DeviceId d) { return to_dtype(device_settings(d).bool_dtype); }
inline DType int_out(DeviceId d) { return to_dtype(device_settings(d).int_dtype); }

inline DType resolve_dtype(OpCode op, DeviceId device, Kind kind, std::optional<DType> dtype) {
  check_device(op_name(op), device);
  if (!dtype) return default_dtype(device, kind, op_name(op));
  if (kind_of_dtype(*dtype) != kind)
    throw DTypeError(fmt::format("[{}] dtype does not match the tensor kind; expected a {} dtype; got {}", op_name(op),
                                 kind_name(kind), dtype_name(*dtype)));
  return *dtype;
}

inline void check_create_kind(OpCode op, Kind kind) {
  const std::uint8_t bit = kind == Kind::Float ? kKindF : kind == Kind::Int ? kKindI : kind == Kind::Bool ? kKindB : 0;
  if (!(op_info(op).kinds & bit))
    throw DTypeError(fmt::format("[{}] wrong tensor kind; expected {}; got {}", op_name(op), kinds_str(op_info(op).kinds),
                                 kind_name(kind)));
}

// Index tensors: Int kind, on the same device as the data.
inline void check_indices(OpCode op, const DispatchTensor& a, const DispatchTensor& idx) {
  if (!idx.prim) throw Error(fmt::format("[{}] expected an index tensor; got an empty handle", op_name(op)));
  if (idx.kind != Kind::Int)
    throw DTypeError(fmt::format("[{}] indices must be an Int tensor; expected Int; got {}", op_name(op), kind_name(idx.kind)));
  check_same_device(op, a, idx);
}

// An enum argument within its enumerators (a value cast from an integer may not be).
template <class E>
inline void check_enum(OpCode op, const char* what, E v, E last, const char* names) {
  if (static_cast<unsigned>(v) > static_cast<unsigned>(last))
    throw ShapeError(fmt::format("[{}] {} out of range; expected one of {}; got {}", op_name(op), what, names,
                                 static_cast<unsigned>(v)));
}
inline void check_update(OpCode op, IndexingUpdateOp u) {
  check_enum(op, "update op", u, IndexingUpdateOp::Max, "Assign, Add, Mul, Min, Max");
}

inline void check_mask(OpCode op, const DispatchTensor& a, const DispatchTensor& mask) {
  if (!mask.prim) throw Error(fmt::format("[{}] expected a mask tensor; got an empty handle", op_name(op)));
  if (mask.kind != Kind::Bool)
    throw DTypeError(fmt::format("[{}] mask must be a Bool tensor; expected Bool; got {}", op_name(op), kind_name(mask.kind)));
  check_same_device(op, a, mask);
}

// The op table's empty-input rule.
inline bool empty_raises(OpCode op, Kind k) {
  const EmptyRule r = op_info(op).empty;
  return r == EmptyRule::Raises || (r == EmptyRule::IntRaises && k == Kind::Int);
}

inline OpAttrs with_ints(std::int64_t x, std::int64_t y = 0, std::int64_t z = 0) {
  OpAttrs a;
  a.ints = {x, y, z};
  return a;
}
inline std::int64_t i64(std::size_t v) { return static_cast<std::int64_t>(v); }

// An extremum along `d` of a tensor with no elements: raises when the axis itself is
// empty (no answer), and is true (the result is empty too) when another dim is 0.
inline bool empty_off_axis(OpCode op, const Shape& s, std::size_t d) {
  if (s.num_elements() != 0) return false;
  if (s[d] == 0)
    throw ShapeError(fmt::format("[{}] expected a non-empty tensor along dim {}; got shape {}", op_name(op), d, s.to_string()));
  return true;
}
// The empty result of reducing `a` (which has no elements) along `d`.
inline DispatchTensor empty_reduced(const DispatchTensor& a, std::size_t d, Kind kind, DType dtype) {
  Shape out = a.shape();
  out[d] = 1;
  return create(OpCode::empty, out, a.device, kind, dtype);
}
inline OpAttrs with_scalars(Scalar x, Scalar y = Scalar()) {
  OpAttrs a;
  a.scalars = {x, y};
  return a;
}

// An operand of a module op: present, Float, on the first operand's device. Optional
// operands are checked only when present (a null prim).
inline void check_operand(OpCode op, const DispatchTensor& first, const DispatchTensor& t, const char* what) {
  if (!t.prim) throw Error(fmt::format("[{}] expected a {} tensor; got an empty handle", op_name(op), what));
  if (t.kind != Kind::Float)
    throw DTypeError(fmt::format("[{}] {} must be a Float tensor; expected Float; got {}", op_name(op), what, kind_name(t.kind)));
  check_same_device(op, first, t);
}
inline void check_module_first(OpCode op, const DispatchTensor& t, const char* what) {
  if (!t.prim) throw Error(fmt::format("[{}] expected a {} tensor; got an empty handle", op_name(op), what));
  check_first(op, t);
}
inline const Shape* shape_or_null(const DispatchTensor& t) { return t.prim ? &t.shape() : nullptr; }

// A module op computes in one float dtype on every device: its present float operands must
// all have the first one's. Refused here, before any backend: a backend that converted
// (the cpu) and one that read the raw words as the first's dtype (vulkan) disagreed.
struct Named {
  const char* what;
  const DispatchTensor& t;
};
inline void check_one_float_dtype(OpCode op, std::initializer_list<Named> operands) {
  const DType want = operands.begin()->t.dtype();
  bool same = true;
  for (const Named& n : operands) same = same && (!n.t.prim || n.t.dtype() == want);
  if (same) return;
  std::string got;
  for (const Named& n : operands)
    if (n.t.prim) got += fmt::format("{}{} {}", got.empty() ? "" : ", ", dtype_name(n.t.dtype()), n.what);
  throw DTypeError(fmt::format("[{}] operands must share one float dtype; expected {} for every operand; got {}", op_name(op),
                               dtype_name(want), got));
}

inline void check_same_shape(OpCode op, const char* what, const Shape& got, const Shape& want) {
  if (!(got == want))
    throw ShapeError(fmt::format("[{}] {} has the wrong shape; expected {}; got {}", op_name(op), what, want.to_string(),
                                 got.to_string()));
}
// ---- the generic path -------------------------------------------------------------------
// Each family states its rule once, as a specialisation of Rule<F> in the rules file of
// its op-table section:
//   Plan check(OpCode op, const Args&... args)  validates (kind and usage from the op table,
//                                  shapes, dims, options) and keeps what it worked out
//   DeviceId device(const Plan&, const Args&...)  where the op runs
//   OutMeta meta(OpCode, const Plan&, const Args&...)  the output's metadata (hooks only)
//   OpAttrs attrs(OpCode, const Plan&, const Args&...)  its attributes (hooks only)
//   R run(OpCode op, Entry entry, const Plan&, Args&... args)  (always inlined into the op's body:
//                                  the direct path pays no call) calls entry(op) (the backend's
//                                  function for op) with the unwrapped arguments and wraps the
//                                  result; an identity shortcut returns an input instead
// forward<F> runs them in that order around the one invoke call site.
struct RuleBase {
  template <class Plan, class... A>
  static OpAttrs attrs(OpCode, const Plan&, const A&...) { return {}; }
};

// Families whose op runs on the device of their first tensor argument.
struct OnFirst : RuleBase {
  template <class Plan, class... A>
  static DeviceId device(const Plan&, const DispatchTensor& a, const A&...) { return a.device; }
};

// Module families: a Float result of the plan's shape `out`, in the first tensor's dtype.
struct FloatOut : OnFirst {
  template <class Plan, class... A>
  static OutMeta meta(OpCode, const Plan& p, const DispatchTensor& a, const A&...) { return {p.out, a.dtype(), Kind::Float}; }
};
inline OpAttrs options_attrs(const void* options, const Shape* shape = nullptr) {
  OpAttrs o;
  o.options = options;
  o.shape = shape;
  return o;
}

template <Family F> struct Rule;

// The backend entries a rule's run may call: its family's entry for an op (entry(op)),
// or, inside the same op, another family's (entry.other<Family::Create>(OpCode::empty)).
template <Family F>
struct EntryOf {
  DeviceId d;
  __attribute__((always_inline)) FamilyFn<F> operator()(OpCode o) const { return entry<F>(o, d); }
  template <Family G>
  FamilyFn<G> other(OpCode o) const { return entry<G>(o, d); }
};

// ---- graph replay: one op frozen (dispatch/graph.hpp records these at the hook) ---------
// A non-tensor argument is copied (a span into a vector it owns); tensor arguments are
// taken at replay, in call order, from the inputs the replay list hands the thunk.
template <class A> struct Frozen {
  using Live = A;
  A v;
  explicit Frozen(const A& a) : v(a) {}
  Live live(std::span<DispatchTensor>, std::size_t&) const { return v; }
};
template <> struct Frozen<DispatchTensor> {
  using Live = DispatchTensor;
  explicit Frozen(const DispatchTensor&) {}
  Live live(std::span<DispatchTensor> in, std::size_t& k) const { return std::move(in[k++]); }
};
template <> struct Frozen<std::vector<DispatchTensor>> {
  using Live = std::vector<DispatchTensor>;
  std::size_t n;
  explicit Frozen(const std::vector<DispatchTensor>& v) : n(v.size()) {}
  Live live(std::span<DispatchTensor> in, std::size_t& k) const {
    Live out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) out.push_back(std::move(in[k++]));
    return out;
  }
};
template <class T> struct Frozen<std::span<T>> {
  using Live = std::span<T>;
  mutable std::vector<std::remove_const_t<T>> v;
  explicit Frozen(std::span<T> s) : v(s.begin(), s.end()) {}
  Live live(std::span<DispatchTensor>, std::size_t&) const { return Live(v.data(), v.size()); }
};

// The backend entry resolved once, at capture (an entry the op did not need there, such as
// an identity shortcut's, is looked up if a replay ever asks for it).
template <Family F>
struct Resolved : EntryOf<F> {
  FamilyFn<F> fn;
  FamilyFn<F> operator()(OpCode o) const { return fn ? fn : EntryOf<F>::operator()(o); }
};

template <Family F, class Plan, class... A>
class Thunk final : public GraphThunk {
 public:
  Thunk(OpCode op, DeviceId d, const Plan& plan, const A&... args)
      : op_(op), entry_{{d}, backend_of(d).template get<F>(op)}, plan_(plan), args_(Frozen<A>(args)...) {}

  void run(std::span<DispatchTensor> in, std::span<DispatchTensor> out) const override {
    std::size_t k = 0;
    auto live = std::apply([&](const auto&... f) { return std::tuple<typename Frozen<A>::Live...>{f.live(in, k)...}; }, args_);
    set_current_op(op_);
    auto r = std::apply([&](auto&... a) { return Rule<F>::run(op_, entry_, plan_, a...); }, live);
    using O = hooks_detail::Outputs<decltype(r)>;
    auto o = O::split(std::move(r));
    for (std::size_t i = 0; i < O::kCount && i < out.size(); ++i) out[i] = std::move(o[i]);
  }

 private:
  OpCode op_;
  Resolved<F> entry_;
  Plan plan_;
  std::tuple<Frozen<A>...> args_;
};

template <Family F, class... A>
__attribute__((always_inline)) inline auto forward_direct(OpCode op, A&... args) {
  using R = Rule<F>;
  const auto plan = R::check(op, std::as_const(args)...);
  const DeviceId d = R::device(plan, std::as_const(args)...);
  const EntryOf<F> fn{d};
  return invoke(
      op, d, [&]() __attribute__((always_inline)) { return R::run(op, fn, plan, args...); },
      [&] {
        auto m = R::meta(op, plan, std::as_const(args)...);
        if constexpr (std::is_same_v<decltype(m), OutMeta>)
          if (op_info(op).qrule == QRule::Flow) [[unlikely]] flow_meta(m, d);
        return m;
      },
      [&] { return R::attrs(op, plan, std::as_const(args)...); },
      [&]() -> std::unique_ptr<GraphThunk> {
        using Res = decltype(R::run(op, fn, plan, args...));
        if constexpr (hooks_detail::Outputs<Res>::kCount > 0)
          return std::make_unique<Thunk<F, std::remove_const_t<decltype(plan)>, std::remove_const_t<A>...>>(
              op, d, plan, std::as_const(args)...);
        else
          return nullptr;
      },
      std::as_const(args)...);
}

// ---- quantized operands (the op table's quant section) -----------------------------------
// A float op with a q row (its twin) and quantized Float operands: all of them quantized,
// the q row runs; some, they are dequantized to the first float operand's dtype and the
// float op runs (burn's front-end rule). Families without q rows pay nothing.
namespace qroute {
constexpr bool family_has_q(Family f) {
  for (const OpInfo& o : kOps)
    if (o.qrule != QRule::None && o.family == f) return true;
  return false;
}
inline void count(const DispatchTensor& t, int& floats, int& quantized) {
  if (t.prim && t.kind == Kind::Float) {
    ++floats;
    quantized += t.prim->dtype() == DType::QFloat;
  }
}
inline void count(const std::vector<DispatchTensor>& v, int& floats, int& quantized) {
  for (const DispatchTensor& t : v) count(t, floats, quantized);
}
template <class O>
inline void count(const O&, int&, int&) {}
inline void first_float(const DispatchTensor& t, DType& out) {
  if (out == DType::QFloat && t.prim && t.kind == Kind::Float && t.prim->dtype() != DType::QFloat) out = t.prim->dtype();
}
inline void first_float(const std::vector<DispatchTensor>& v, DType& out) {
  for (const DispatchTensor& t : v) first_float(t, out);
}
template <class O>
inline void first_float(const O&, DType&) {}
inline void dequantized(DispatchTensor& t, DType to) {
  if (t.prim && t.prim->dtype() == DType::QFloat) t = dequantize_operand(t, to);
}
inline void dequantized(std::vector<DispatchTensor>& v, DType to) {
  for (DispatchTensor& t : v) dequantized(t, to);
}
template <class O>
inline void dequantized(O&, DType) {}

template <Family F, class... A>
[[gnu::noinline, gnu::cold]] auto route(OpCode op, A&... args) {
  int floats = 0, quantized = 0;
  (count(std::as_const(args), floats, quantized), ...);
  if (quantized == floats) return forward_direct<F>(static_cast<OpCode>(op_info(op).twin), args...);
  DType to = DType::QFloat;
  (first_float(std::as_const(args), to), ...);
  (dequantized(args, to), ...);
  return forward_direct<F>(op, args...);
}
}  // namespace qroute

template <Family F, class... A>
__attribute__((always_inline)) inline auto forward(OpCode op, A&... args) {
  if constexpr (qroute::family_has_q(F)) {
    if (op_info(op).twin != kNoTwin && !op_info(op).qfloat_in) [[unlikely]] {
      int floats = 0, quantized = 0;
      (qroute::count(std::as_const(args), floats, quantized), ...);
      if (quantized > 0) return qroute::route<F>(op, args...);
    }
  }
  return forward_direct<F>(op, args...);
}

}  // namespace tensor::dispatch::fwd
