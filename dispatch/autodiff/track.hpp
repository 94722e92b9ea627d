// The decorator's entries: one generic tracking entry, Track<op>, runs every op that has a
// backward row (rules/*.def), and Pass<op> forwards the ops that have none to the inner
// backend. Both unwrap their arguments, run the inner backend's entry and wrap the
// result; an untracked call does nothing more (no node, no saved state, no allocation
// beyond the wrapper). A tracked call saves what the row keeps and records a node whose
// backward step is the row's gradient.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch/autodiff/checkpoint.hpp"
#include "dispatch/autodiff/graph.hpp"
#include "dispatch/autodiff/math.hpp"
#include "dispatch/autodiff/rules.hpp"
#include "dispatch/graph.hpp"
#include "dispatch/validate.hpp"
#include "tensor/error.hpp"

namespace tensor::dispatch::ad::detail {

inline const Backend& inner_backend(DeviceId inner) { return Registry::instance().get(inner.type_id); }
template <Family F>
FamilyFn<F> inner_fn(OpCode op, DeviceId inner) {
  const Backend& b = inner_backend(inner);
  auto fn = b.get<F>(op);
  if (!fn) throw_not_implemented(op, b);
  return fn;
}

// ---- arguments: unwrapped on the way in, wrapped (untracked) on the way out ----

template <class V> struct Conv {
  template <class U> static decltype(auto) in(U&& v) { return std::forward<U>(v); }
  template <class U> static decltype(auto) out(U&& v) { return std::forward<U>(v); }
};
template <> struct Conv<Prim> {
  static Prim in(Prim p) { return p ? unwrap(std::move(p)) : Prim(); }  // null: an absent optional tensor
  static Prim out(Prim p) { return wrap(std::move(p)); }
};
template <> struct Conv<const Prim&> {
  static const Prim& in(const Prim& p) {
    note(p->device());
    return as_ad(p).inner_;
  }
};
template <> struct Conv<PrimPair> {
  static PrimPair out(PrimPair p) { return {wrap(std::move(p.first)), wrap(std::move(p.second))}; }
};
template <> struct Conv<std::vector<Prim>> {
  static std::vector<Prim> in(std::vector<Prim> v) {
    for (Prim& p : v) p = unwrap(std::move(p));
    return v;
  }
  static std::vector<Prim> out(std::vector<Prim> v) {  // a null entry (an absent gradient) stays null
    for (Prim& p : v)
      if (p) p = wrap(std::move(p));
    return v;
  }
};
template <> struct Conv<DeviceId> {
  // A target device notes its strategy last (to_device: the result is on `to`).
  static DeviceId in(DeviceId d) {
    if (is_autodiff_device(d)) note(d);
    return autodiff_inner(d);
  }
};
template <class A> using ConvIn = decltype(Conv<A>::in(std::declval<A>()));

template <class V> DeviceId inner_dev(const V&) { return {}; }
inline DeviceId inner_dev(const Prim& p) { return as_ad(p).inner_->device(); }
inline DeviceId inner_dev(const std::vector<Prim>& v) { return v.empty() ? DeviceId{} : as_ad(v[0]).inner_->device(); }
inline DeviceId inner_dev(DeviceId d) { return autodiff_inner(d); }
template <class V> bool tracked_arg(const V&) { return false; }
inline bool tracked_arg(const Prim& p) { return p && node_of(p) != nullptr; }
inline bool tracked_arg(const std::vector<Prim>& v) {
  for (const Prim& p : v)
    if (node_of(p)) return true;
  return false;
}

template <class V> constexpr bool names_device = std::is_same_v<V, Prim> || std::is_same_v<V, std::vector<Prim>> ||
                                                std::is_same_v<V, DeviceId>;
// The inner device of the first argument that names one.
template <class... A>
DeviceId pick_device(const A&... args) {
  DeviceId pick{};
  bool have = false;
  auto take = [&](const auto& a) {
    using U = std::decay_t<decltype(a)>;
    if constexpr (names_device<U>) {
      if constexpr (std::is_same_v<U, Prim>) {
        if (!a) return;
      } else if constexpr (std::is_same_v<U, std::vector<Prim>>) {
        if (a.empty()) return;
      }
      if (!have) pick = inner_dev(a), have = true;
    }
  };
  (take(args), ...);
  return pick;
}

// Unwraps every argument (left to right: the last device noted wins), runs the inner
// entry and wraps the result untracked. The inner call is a graph node while this thread
// captures (graph::call_entry).
template <OpCode op, class R, class... A>
R forward_untracked(A&&... args) {
  const DeviceId dev = pick_device(args...);
  const auto fn = inner_fn<op_family(op)>(op, dev);
  std::tuple<ConvIn<A>...> in{Conv<A>::in(std::forward<A>(args))...};
  if constexpr (std::is_void_v<R>) graph::call_entry(op, dev, fn, std::move(in));
  else return Conv<R>::out(graph::call_entry(op, dev, fn, std::move(in)));
}

// ---- Pass: ops without a row ----

template <OpCode op, class Fn = FamilyFn<op_family(op)>> struct Pass;
template <OpCode op, class R, class... A>
struct Pass<op, R (*)(A...)> {
  static R call(A... args) {
    if constexpr (coverage_of(op) == Coverage::Missing) {
      if ((tracked_arg(args) || ...))
        throw Error(fmt::format("[{}] has no backward on autodiff devices; expected inputs that do not require grad; "
                                "got a tracked tensor (detach() it first)",
                                op_name(op)));
    } else if constexpr (second_order(op)) {
      if ((tracked_arg(args) || ...))
        throw Error(fmt::format("[{}] is a backward entry and second-order autodiff is not supported; expected "
                                "inputs that do not require grad; got a tracked tensor (detach() it first)",
                                op_name(op)));
    }
    return forward_untracked<op, R, A...>(std::forward<A>(args)...);
  }
};

// ---- Track: ops with a row ----

// What a row keeps (forms.hpp).
namespace keep {
inline constexpr std::uint32_t Nothing = 0, X = 1, A = 1, B = 2, C = 4, D = 8, E = 16, Y = 32, I = 64, Crossed = 128;
}

template <class A> inline constexpr bool is_tensor = std::is_same_v<A, Prim>;
// An argument as the backward step keeps it (spans become owning vectors).
template <class A> struct StoredT { using type = std::decay_t<A>; };
template <> struct StoredT<Axes> { using type = std::vector<std::size_t>; };
template <> struct StoredT<DimSlices> { using type = std::vector<DimSlice>; };
template <class A> auto store_one(const A& a) {
  using S = typename StoredT<A>::type;
  if constexpr (is_tensor<A>) return std::tuple<>();
  else if constexpr (std::is_same_v<S, A>) return std::tuple<S>(a);
  else return std::tuple<S>(S(a.begin(), a.end()));
}

// Every tensor input's metadata, kept whatever the row keeps.
struct Meta {
  Shape shape;
  DType dtype{};
  DeviceId device{};
  bool present = false;  // false: an absent optional tensor
};

// The saved state of one tracked call, what a row's statements read.
template <std::size_t NT, class Args>
struct State {
  std::array<Saved, NT> in;
  std::array<Meta, NT> meta;
  Saved y, ix;
  Args args;
  // Tensor input k as kept (empty where the row does not keep it).
  T get(std::size_t k) const { return k < NT ? in[k].get() : T(); }
  const Shape& shape(std::size_t k) const { return meta[k].shape; }
  DType dtype(std::size_t k) const { return meta[k].dtype; }
  DeviceId device(std::size_t k) const { return meta[k].device; }
  bool has(std::size_t k) const { return k < NT && meta[k].present; }
};
// The k-th argument that is not a tensor.
template <std::size_t K, class S> const auto& arg(const S& st) { return std::get<K>(st.args); }

template <OpCode op> struct Rule;  // rules/*.def, through AD_DEFINE_ROW

template <OpCode op, class Fn = FamilyFn<op_family(op)>> struct Track;
template <OpCode op, class R, class... A>
struct Track<op, R (*)(A...)> {
  using Row = Rule<op>;
  static constexpr Family kFamily = op_family(op);
  static constexpr std::size_t kTensors = (std::size_t{0} + ... + std::size_t{is_tensor<A>});
  using Args = decltype(std::tuple_cat(store_one(std::declval<const A&>())...));
  using St = State<kTensors, Args>;

  static R call(A... args) {
    if (!(tracked_arg(args) || ...)) return forward_untracked<op, R, A...>(std::forward<A>(args)...);
    return tracked(std::index_sequence_for<A...>{}, args...);
  }

 private:
  template <std::size_t J> static constexpr std::size_t tensor_index() {
    constexpr bool t[] = {is_tensor<A>...};
    std::size_t n = 0;
    for (std::size_t j = 0; j < J; ++j) n += t[j];
    return n;
  }
  // Argument J for the inner entry: an opened tensor (moved: what the step keeps holds
  // its own reference) or the argument itself.
  template <std::size_t J, class U>
  static decltype(auto) inner_arg(std::array<In, kTensors>& in, U& a) {
    if constexpr (is_tensor<U>) return std::move(in[tensor_index<J>()].p);
    else return Conv<U>::in(a);
  }

  template <std::size_t... J>
  static R tracked(std::index_sequence<J...>, A&... args) {
    constexpr std::uint32_t keeps = Row::kKeep;
    const DeviceId dev = pick_device(args...);
    St st{};
    st.args = std::tuple_cat(store_one(args)...);
    std::array<In, kTensors> in;
    std::array<NodeRef, kTensors> parents;
    auto open_tensor = [&](auto& a, auto index) {
      if constexpr (is_tensor<std::decay_t<decltype(a)>>) {
        constexpr std::size_t k = decltype(index)::value;
        in[k] = open(std::move(a));
        if (in[k].p) st.meta[k] = Meta{in[k].p->shape(), in[k].p->dtype(), in[k].p->device(), true};
        if (op_info(op).diff >> k & 1) parents[k] = in[k].node;
      }
    };
    (open_tensor(args, std::integral_constant<std::size_t, tensor_index<J>()>{}), ...);

    for (std::size_t k = 0; k < kTensors; ++k) {
      bool kept = keeps >> k & 1;
      if ((keeps & keep::Crossed) && k < 2 && kTensors > 1) kept = kept && in[1 - k].node;
      if (kept) st.in[k] = save(in[k]);
    }
    RecipeRef ry;  // balanced checkpointing: the recipe of the output
    if constexpr (replayable(kFamily)) {
      if (balanced()) {
        RecipeStep step{op, std::nullopt};
        if constexpr (kFamily == Family::Scalar) step.s = std::get<0>(st.args);
        RecipeRef rx = input_recipe(in[0]);
        ry = extend(rx, step);
        if (keeps & keep::X) st.in[0] = Saved{T(), std::move(rx)};
      }
    }

    Prim y, ix;
    if constexpr (Row::kVia != op) {  // run the with-indices form
      const auto fn = inner_fn<op_family(Row::kVia)>(Row::kVia, dev);
      std::tie(y, ix) = graph::call_entry(Row::kVia, dev, fn, std::forward_as_tuple(inner_arg<J>(in, args)..., int_dtype(dev)));
    } else if constexpr (std::is_same_v<R, PrimPair>) {
      std::tie(y, ix) = graph::call_entry(op, dev, inner_fn<kFamily>(op, dev), std::forward_as_tuple(inner_arg<J>(in, args)...));
    } else {
      y = graph::call_entry(op, dev, inner_fn<kFamily>(op, dev), std::forward_as_tuple(inner_arg<J>(in, args)...));
    }
    if (keeps & keep::Y) st.y = ry ? Saved{T(), ry} : Saved{dt(y), nullptr};
    if (keeps & keep::I) st.ix = Saved{dt(ix), nullptr};

    Prim res = record<kTensors>(op, std::move(y), std::move(parents),
                                [st = std::move(st)](const T& g, std::uint32_t need, std::span<T> out) {
                                  Row::grad(st, g, need, out);
                                });
    if (ry) res = with_recipe(std::move(res), std::move(ry));
    if constexpr (std::is_same_v<R, PrimPair>) return {std::move(res), wrap(std::move(ix))};
    else return res;
  }
};

// Rows in the TU that registers them (rules_*.cpp): AD_ROW as AD_DEFINE_ROW defines the
// Rule, as AD_REGISTER_ROW sets the entry.
#define AD_DEFINE_ROW(name, via, keeps, ...)                                                               \
  template <> struct Rule<OpCode::name> {                                                                  \
    static constexpr OpCode kVia = OpCode::via;                                                            \
    static constexpr std::uint32_t kKeep = [] {                                                           \
      using namespace keep;                                                                                \
      return std::uint32_t{keeps};                                                                         \
    }();                                                                                                   \
    template <class S>                                                                                     \
    static void grad(const S& st, const T& g, [[maybe_unused]] std::uint32_t need, std::span<T> out) {     \
      [[maybe_unused]] const T x = st.get(0), b = st.get(1), y = st.y.get(), ix = st.ix.get();              \
      [[maybe_unused]] const T& a = x;                                                                     \
      __VA_ARGS__                                                                                          \
    }                                                                                                      \
  };
#define AD_REGISTER_ROW(name, via, keeps, ...) b.set<OpCode::name>(&Track<OpCode::name>::call);
#define AD_REGISTER_ENTRY(name, fn) b.set<OpCode::name>(&fn);

// The entries of their own (entries.cpp).
Prim t_mask_select(Prim a, Prim mask);
Prim t_attention(Prim q, Prim k, Prim v, Prim mask, Prim bias, const tensor::nn::AttentionModuleOptions& o);

// Registration, one function per rules file (rules_*.cpp).
void register_elementwise(Backend& b);
void register_reduce(Backend& b);
void register_shape(Backend& b);
void register_module(Backend& b);

}  // namespace tensor::dispatch::ad::detail
