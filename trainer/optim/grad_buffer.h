// GradBuffer: one contiguous fp32 gradient buffer per rank, split into buckets, with a grad-ready mechanism
// that starts each bucket's data-parallel all-reduce as soon as its last param's grad of the step's last
// microbatch has been accumulated. Megatron: core/distributed/param_and_grad_buffer.py + the backward
// post-hook of distributed_data_parallel.py (no distributed optimizer, no overlap: the all-reduce blocks).
//
// Params are laid out in reverse registration order (backward produces grads roughly in that order). A
// bucket closes once it holds >= bucket_size elements; params are never split. For fp32 params, param.grad
// IS a view into the buffer (autograd accumulates in place); other dtypes are folded into the fp32 buffer
// by the hook and their .grad reset, as Megatron's hook does with main_grad.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "trainer/model/param.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

// Gives >= 4 buckets per rank for the default model (config.h) on every fixture layout
// (suites/unit/test_model_grad_buffer.cpp measures it).
constexpr int64_t kDefaultBucketSize = 8192;

struct GradBufferConfig {
  int64_t bucket_size = kDefaultBucketSize;  // elements
};

// Where each param's grad lives and which params form each bucket: a pure function of the params' element
// counts (registration order) and the bucket size, so flags can be checked against a rank's buckets without
// building the model (trainer/model/init.h stage_param_shapes). GradBuffer lays itself out with it.
struct BucketLayout {
  std::vector<int64_t> offset;                // param -> first element in the buffer
  std::vector<int> bucket_of;                 // param -> bucket
  std::vector<std::vector<int>> members;      // bucket -> params, in buffer order
  std::vector<std::pair<int64_t, int64_t>> ranges;  // bucket -> (start, length) in elements
  int64_t total = 0;
  int num_buckets() const { return static_cast<int>(members.size()); }
};
BucketLayout layout_grad_buckets(const std::vector<int64_t>& numels, int64_t bucket_size);

// The fp32 main grads: one flat buffer and each param's view of it (GradBuffer::data() and param_grad(i), in the
// buffer's layout). Adam keeps its main params and moments laid out as the flat buffer is, so each operation of the
// update is one kernel over every param, as Apex's multi_tensor_adam is one launch for all of them.
struct MainGrads {
  at::Tensor flat;                // fp32 [total]
  std::vector<at::Tensor> views;  // param i's grad, shaped like it: a view of `flat`
  // Each view's first element in `flat`.
  std::vector<int64_t> offsets() const;
};

class GradBuffer {
 public:
  // bucket: index; grads: the bucket's fp32 view in the buffer (local, pre-DP grads).
  using BucketCallback = std::function<void(int bucket, at::Tensor& grads)>;

  GradBuffer(const Params& params, CommPtr dp, GradBufferConfig config = {});
  ~GradBuffer();
  GradBuffer(const GradBuffer&) = delete;
  GradBuffer& operator=(const GradBuffer&) = delete;

  // Test hook: runs first when a bucket is ready (a fault injector poisons the local grads here).
  BucketCallback before_bucket_ready;
  // Runs when a bucket is ready, before its DP all-reduce (Megatron check_grads in start_grad_sync: the loop's
  // per-bucket NaN check).
  BucketCallback on_bucket_ready;

  void zero();  // Megatron zero_grad_buffer: zero the grads and the per-step ready state
  // Megatron no_sync: while disabled, hooks only accumulate; enable before the step's last backward.
  void set_grad_sync(bool enabled);
  bool grad_sync() const;
  // Megatron finish_grad_sync: every bucket not yet reduced by its hook is reduced now (callbacks included),
  // so each bucket is reduced exactly once per step; then the ready state resets.
  void finish_grad_sync();

  int num_buckets() const;
  at::Tensor bucket(int k) const;                       // fp32 view [numel of bucket k]
  const std::vector<int>& bucket_params(int k) const;   // param indices (registration order) in bucket k
  at::Tensor param_grad(int i) const;                   // fp32 view shaped like param i (registration order)
  at::Tensor data() const;                              // the whole buffer
  MainGrads main_grads() const;                         // the whole buffer and every param's view
  int64_t numel() const;
  int buckets_reduced_by_hook() const;                  // this step: buckets whose hook launched the reduce

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace loopgate
