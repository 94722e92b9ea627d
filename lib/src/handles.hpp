// Handle <-> DispatchTensor conversion of the firewall's library side (api.cpp, nn.cpp).
#pragma once

#include <cstring>
#include <utility>

#include "dispatch/dispatch.hpp"
#include "tensor/detail.hpp"

namespace tensor::detail::handles {

using dispatch::DispatchTensor;
using dispatch::Primitive;

static_assert(sizeof(DispatchTensor) <= sizeof(Handle), "a DispatchTensor must fit a Handle's bytes");

// Handle layout: [0..8) Primitive*, [8..12) DeviceId, [12] kind.
inline Primitive* prim_of(const Handle& h) {
  Primitive* p = nullptr;
  std::memcpy(&p, h.bytes, sizeof p);
  return p;
}

// Never throws: every handle argument is owned by a DispatchTensor before anything
// can fail, so an error in one argument cannot leak another. An empty (moved-from)
// handle becomes an empty DispatchTensor, which every forwarder rejects by name.
inline DispatchTensor take(Handle& h) noexcept {
  DispatchTensor t;
  t.prim = prim_of(h);
  std::memcpy(&t.device, h.bytes + 8, sizeof t.device);
  t.kind = static_cast<Kind>(h.bytes[12]);
  h = Handle{};
  return t;
}

inline Handle give(DispatchTensor t) {
  Handle h;
  Primitive* p = std::exchange(t.prim, nullptr);
  std::memcpy(h.bytes, &p, sizeof p);
  std::memcpy(h.bytes + 8, &t.device, sizeof t.device);
  h.bytes[12] = static_cast<unsigned char>(t.kind);
  return h;
}

inline std::pair<Handle, Handle> give2(std::pair<DispatchTensor, DispatchTensor> p) {
  return {give(std::move(p.first)), give(std::move(p.second))};
}

}  // namespace tensor::detail::handles
