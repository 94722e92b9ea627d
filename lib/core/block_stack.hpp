// A per-thread stack of freed fixed-size heap blocks (lib-internal): for the objects every
// op allocates and frees.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace tensor::core {

// Freed fixed-size heap blocks kept per thread (at most kCap), so that the objects
// every op allocates and frees (the result primitive, small storage) skip malloc and
// free: measured with callgrind, a + b on two [4] f32 spent ~30% of its instructions
// in them. Blocks go back to the thread that frees them; a thread's blocks are freed
// when it exits (after that, its frees go straight to free()).
template <std::size_t kSize>
class BlockStack {
 public:
  static void* take() {
    if (!dead_) {
      BlockStack& s = mine();
      if (s.n_) return s.items_[--s.n_];
    }
    void* p = std::malloc(kSize);
    if (!p) throw std::bad_alloc();
    return p;
  }
  static void give(void* p) {
    if (!dead_) {
      BlockStack& s = mine();
      if (s.n_ < kCap) {
        s.items_[s.n_++] = p;
        return;
      }
    }
    std::free(p);
  }
  ~BlockStack() {
    dead_ = true;
    for (std::size_t i = 0; i < n_; ++i) std::free(items_[i]);
    n_ = 0;
  }

 private:
  static constexpr std::size_t kCap = 64;
  // initial-exec: a fixed offset from the thread pointer instead of a __tls_get_addr
  // call per access (which cost more than malloc saves); 520 bytes per stack.
  static BlockStack& mine() {
    thread_local BlockStack s __attribute__((tls_model("initial-exec")));
    return s;
  }
  void* items_[kCap];
  std::size_t n_ = 0;
  static thread_local bool dead_ __attribute__((tls_model("initial-exec")));
};
template <std::size_t kSize>
thread_local bool BlockStack<kSize>::dead_ __attribute__((tls_model("initial-exec"))) = false;

}  // namespace tensor::core
