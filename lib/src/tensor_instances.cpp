// The one instantiation of Tensor<D, K> for ranks 1-4 and kinds Float, Int and
// Bool: the public header declares them extern, so user code links to these.
#include "tensor/tensor.hpp"

namespace tensor {

TENSOR_INSTANCES(template)

}  // namespace tensor
