// A first libtensor program: create tensors, compute, read results back. Public API only;
// build it with:  g++ -std=c++20 basic.cpp $(pkg-config --cflags --libs tensor)
// Runs on TENSOR_DEVICE (cpu | vulkan | vulkan:N), else the CPU.
#include <tensor/tensor.hpp>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

using namespace tensor;

// Prints values as T; numbers are converted first, since the device's default dtypes
// (set_default_dtypes) may differ from f32/i32.
template <class T>
static void print(const std::string& label, const TensorData& d) {
  std::cout << label << " " << d.shape().to_string() << " " << dtype_name(d.dtype()) << ": [";
  const TensorData as_t = is_bool(d.dtype()) ? d : d.convert(dtype_of<T>);
  const std::vector<T> v = as_t.to_vec<T>();
  for (std::size_t i = 0; i < v.size(); ++i) std::cout << (i ? ", " : "") << +v[i];
  std::cout << "]\n";
}

int main() {
  try {
    Device dev = Device::default_device();
    std::cout << "device " << dev.to_string() << " (" << dev.backend_name() << ")\n";

    auto a = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4, 5, 6}, {2, 3}), dev);
    auto b = Tensor<2>::ones({3, 2}, dev);
    auto c = (a.matmul(b) + 1.0f).exp();  // [[e^7, e^16], ...]: row sums of a, plus 1, exponentiated
    Tensor<2, Bool> m = c.greater_elem(10000.0f);
    auto s = c.sum_dim(1);                // keeps rank: shape [2, 1]

    print<float>("a", a.into_data());
    print<float>("exp(a @ ones + 1)", c.into_data());
    print<bool>("  > 10000", m.into_data());
    print<float>("  sum_dim(1)", s.into_data());

    auto t = a.transpose().slice({{0, 3, 2}});  // views: rows 0 and 2 of a^T, no copy on cpu
    print<float>("a^T[0:3:2]", t.into_data());

    auto i = Tensor<1, Int>::arange(0, 6, dev);
    print<std::int64_t>("arange(0, 6)", i.into_data());

    DTypeUsageSet u = dev.dtype_usage(DType::F16);
    std::cout << "f16 arithmetic on " << dev.to_string() << ": "
              << (u.contains(DTypeUsage::Arithmetic) ? "yes" : "no") << "\n";
    return 0;
  } catch (const Error& e) {  // every libtensor error derives from tensor::Error
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
