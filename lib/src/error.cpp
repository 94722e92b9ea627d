// Out-of-line destructors anchor the exception classes' type info in libtensor.so.
#include "tensor/error.hpp"

namespace tensor {

Error::~Error() = default;
ShapeError::~ShapeError() = default;
DTypeError::~DTypeError() = default;
DeviceError::~DeviceError() = default;
ExecutionError::~ExecutionError() = default;
GraphCaptureError::~GraphCaptureError() = default;
IndexError::~IndexError() = default;
NotImplemented::~NotImplemented() = default;

}  // namespace tensor
