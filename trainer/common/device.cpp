#include "trainer/common/device.h"

#include <ATen/ATen.h>

namespace loopgate {

at::Tensor product_and_backward(c10::Device device) {
  at::Tensor a = at::ones({2, 2}, at::TensorOptions().device(device));
  a.set_requires_grad(true);  // an at:: factory ignores requires_grad in its options
  at::mm(a, a).sum().backward();
  return a.grad();
}

}  // namespace loopgate
