// The rows of rules/reduce.def: their Rules, and their registration on the decorator.
#include "dispatch/autodiff/track.hpp"

namespace tensor::dispatch::ad::detail {

#define AD_ROW AD_DEFINE_ROW
#define AD_ENTRY(name, fn)
#include "dispatch/autodiff/rules/reduce.def"
#undef AD_ROW
#undef AD_ENTRY

void register_reduce(Backend& b) {
#define AD_ROW AD_REGISTER_ROW
#define AD_ENTRY AD_REGISTER_ENTRY
#include "dispatch/autodiff/rules/reduce.def"
#undef AD_ROW
#undef AD_ENTRY
}

}  // namespace tensor::dispatch::ad::detail
