// Primitive: the base of every backend's tensor object, and Prim, the counted
// pointer ops pass by value (ownership is permission to reuse the buffer).
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "tensor/device.hpp"
#include "tensor/dtype.hpp"
#include "tensor/shape.hpp"

namespace tensor::dispatch {

class Primitive {
 public:
  Primitive(DType dtype, const Shape& shape, DeviceId device) : shape_(shape), dtype_(dtype), device_(device) {}
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;
  virtual ~Primitive() = default;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::size_t rank() const { return shape_.rank(); }
  DeviceId device() const { return device_; }
  // True when this handle is the only reference to its buffer, so an op may write
  // into it. A backend that cannot tell must answer false.
  virtual bool can_mut() const = 0;

  bool unique_ref() const { return refs_.load(std::memory_order_acquire) == 1; }
  void add_ref() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release_ref() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 protected:
  Shape shape_;
  DType dtype_;
  DeviceId device_;

 private:
  mutable std::atomic<std::uint32_t> refs_{1};
};

// Intrusive counted pointer to a Primitive (or a subclass T).
template <class T = Primitive>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}  // NOLINT
  // Adopts a fresh object (refcount already 1).
  static Ref adopt(T* p) { Ref r; r.p_ = p; return r; }
  template <class... A>
  static Ref make(A&&... args) { return adopt(new T(std::forward<A>(args)...)); }

  Ref(const Ref& o) : p_(o.p_) { if (p_) p_->add_ref(); }
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <class U>
  Ref(Ref<U>&& o) noexcept : p_(o.release()) {}  // NOLINT: upcast
  template <class U>
  Ref(const Ref<U>& o) : p_(o.get()) { if (p_) p_->add_ref(); }  // NOLINT: upcast
  Ref& operator=(Ref o) noexcept { std::swap(p_, o.p_); return *this; }
  ~Ref() { if (p_) p_->release_ref(); }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  T* release() { return std::exchange(p_, nullptr); }
  bool operator==(const Ref& o) const { return p_ == o.p_; }

 private:
  T* p_ = nullptr;
};

using Prim = Ref<Primitive>;

// Downcast to a backend's primitive type (the caller knows the backend).
template <class T>
Ref<T> prim_cast(Prim&& p) { return Ref<T>::adopt(static_cast<T*>(p.release())); }
template <class T>
T& prim_as(const Prim& p) { return static_cast<T&>(*p); }

}  // namespace tensor::dispatch
