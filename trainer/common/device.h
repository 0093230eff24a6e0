// The device a run computes on (CPU, or the rank's CUDA device on the GPU tier). Set once per run by whoever
// starts it (fixtures' run_arm), read where the trainer creates tensors that are not derived from another
// tensor (seeds, flags, stat bundles, buffers). CPU by default, so CPU behaviour and bits are unchanged.
#pragma once
#include <c10/core/Device.h>
#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

namespace loopgate {

inline c10::Device& run_device_slot() {
  static c10::Device device(c10::kCPU);
  return device;
}
inline c10::Device run_device() { return run_device_slot(); }
inline void set_run_device(c10::Device device) { run_device_slot() = device; }
inline at::TensorOptions on_run_device(at::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(run_device());
}

// One 2x2 matrix product of ones and its backward on `device`: the first BLAS calls of this thread and of the
// autograd engine's thread for the device (apply_cublas_determinism, trainer/parallel/comm_nccl.h, makes them before
// it may clear CUBLAS_WORKSPACE_CONFIG). Returns the leaf's gradient, every element 4.
at::Tensor product_and_backward(c10::Device device);

}  // namespace loopgate
