// install_defaults(): fills every defaulted entry a backend leaves empty with the
// composition its TENSOR_DEFAULT line names (dispatch/defaults/*.cpp), so the
// registration is the op table itself. Where a composition goes: an op-table default
// (here) if a backend may replace it with a kernel or autodiff should see it as one op;
// a composite behind the firewall (lib/src/composite/) otherwise.
#include "dispatch/defaults/compose.hpp"

namespace tensor::dispatch {
namespace {

template <OpCode op>
void fill(Backend& b, FamilyFn<op_family(op)> fn) {
  if (!b.has(op)) b.set<op>(fn);
}
template <DeviceOp op>
void fill(Backend& b, FamilyFn<device_op_info(op).family> fn) {
  if (!b.has(op)) b.set<op>(fn);
}

}  // namespace

void install_defaults(Backend& b) {
#define TENSOR_FILL_Req(kind, name)
#define TENSOR_FILL_Def(kind, name) fill<kind::name>(b, defaults::default_##name);
#define TENSOR_OP(name, family, kinds, policy, meaning, ...) TENSOR_FILL_##policy(OpCode, name)
#define TENSOR_DEVICE_OP(name, family, policy, meaning) TENSOR_FILL_##policy(DeviceOp, name)
#include "dispatch/table/op_table.def"
#undef TENSOR_DEVICE_OP
#undef TENSOR_OP
#undef TENSOR_FILL_Def
#undef TENSOR_FILL_Req

  // Every defaulted row of the op table must have a default here.
  for (std::size_t i = 0; i < kOps.size(); ++i)
    if (kOps[i].policy == Policy::Def && !b.has(static_cast<OpCode>(i)))
      throw Error(fmt::format("[install_defaults] op '{}' is marked defaulted but has no default", kOps[i].name));
}

}  // namespace tensor::dispatch
