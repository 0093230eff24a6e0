// Megatron's tensor/sequence-parallel mappings (core/tensor_parallel/mappings.py): one autograd Function per
// mapping, forward and backward one collective each, and a free wrapper named as in Megatron whose comment
// states the pair. Every mapping is over the TP group and is the identity for a group of size 1.
// Activations are [s, b, h] (sequence first); under sequence parallel they are [s/tp, b, h] between TP regions.
#pragma once
#include <ATen/core/Tensor.h>

#include "trainer/parallel/comm.h"

namespace loopgate {

// forward: identity, backward: all-reduce (sum)
at::Tensor copy_to_tensor_model_parallel_region(const at::Tensor& x, Comm& tp);
// forward: all-reduce (sum), backward: identity
at::Tensor reduce_from_tensor_model_parallel_region(const at::Tensor& x, Comm& tp);
// forward: keep this rank's slice of the last dim, backward: all-gather along the last dim
at::Tensor scatter_to_tensor_model_parallel_region(const at::Tensor& x, Comm& tp);
// forward: all-gather along the last dim, backward: keep this rank's slice of the last dim
at::Tensor gather_from_tensor_model_parallel_region(const at::Tensor& x, Comm& tp);
// forward: keep this rank's slice of dim 0 (sequence), backward: all-gather dim 0
at::Tensor scatter_to_sequence_parallel_region(const at::Tensor& x, Comm& tp);
// forward: all-gather dim 0, backward: reduce-scatter dim 0 when the gathered tensor feeds a TP-parallel op
// (tensor_parallel_output_grad=true: each rank holds a partial grad), else keep this rank's slice
at::Tensor gather_from_sequence_parallel_region(const at::Tensor& x, Comm& tp,
                                                bool tensor_parallel_output_grad = true);
// forward: reduce-scatter (sum) dim 0, backward: all-gather dim 0
at::Tensor reduce_scatter_to_sequence_parallel_region(const at::Tensor& x, Comm& tp);

}  // namespace loopgate
