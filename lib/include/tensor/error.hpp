// The exception hierarchy thrown at the API boundary. Messages read
// "[op] what is wrong; expected ...; got ...".
#pragma once

#include <stdexcept>
#include <string>

#include "tensor/export.hpp"

namespace tensor {

/// The base of every exception the library throws at its API (catch it for all of them).
/// Messages read "[op] what is wrong; expected ...; got ...". Also thrown directly for a
/// moved-from (empty) tensor and a consumed future.
class TENSOR_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ~Error() override;
};

/// Ranks, shapes and broadcasting that do not fit the op.
class TENSOR_API ShapeError : public Error {
 public:
  using Error::Error;
  ~ShapeError() override;
};

/// Wrong dtype or tensor kind for the op (including a dtype a device lacks).
class TENSOR_API DTypeError : public Error {
 public:
  using Error::Error;
  ~DTypeError() override;
};

/// Unknown or unavailable device, or a settings call that cannot succeed.
class TENSOR_API DeviceError : public Error {
 public:
  /// Which kind of device failure: the device is unknown or unavailable, its settings were
  /// already fixed, it lacks a dtype, or devices do not match (operands on two devices, a tensor
  /// that requires grad leaving its backend).
  enum class Kind { Unavailable, AlreadyInitialized, UnsupportedDType, Mismatch };
  /// An error of `kind` with the message `message`.
  DeviceError(Kind kind, const std::string& message) : Error(message), kind_(kind) {}
  ~DeviceError() override;
  /// Which kind of device failure.
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

/// The backend failed while running work (out of memory, device lost, ...).
class TENSOR_API ExecutionError : public Error {
 public:
  using Error::Error;
  ~ExecutionError() override;
};

/// Something a graph capture cannot record (tensor/graph.hpp): a host read, a sync, a
/// settings change, seeding, a value-dependent shape, an op on another device, a nested
/// capture, a collective. The capture is abandoned; the device stays usable.
class TENSOR_API GraphCaptureError : public ExecutionError {
 public:
  using ExecutionError::ExecutionError;
  ~GraphCaptureError() override;
};

/// An index, dim, slice bound or count outside its valid range.
class TENSOR_API IndexError : public Error {
 public:
  using Error::Error;
  ~IndexError() override;
};

/// The op exists in the op table but this backend has no implementation for it.
class TENSOR_API NotImplemented : public Error {
 public:
  using Error::Error;
  ~NotImplemented() override;
};

}  // namespace tensor
