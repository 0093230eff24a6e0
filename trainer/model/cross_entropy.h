// Vocab-parallel cross entropy (Megatron core/tensor_parallel/cross_entropy.py, 8.6): logits split over the
// vocabulary across TP; the max and the two sums are all-reduced over TP so every TP rank gets the same
// per-token loss. Backward: softmax minus one-hot at the target column, only on the rank owning it.
#pragma once
#include <ATen/core/Tensor.h>

#include "trainer/parallel/comm.h"

namespace loopgate {

// logits: [s, b, V/tp] (any float dtype; computed in fp32), target: [s, b] long (full-vocab ids)
// -> per-token loss [s, b] fp32. No label smoothing.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& target, Comm& tp);

}  // namespace loopgate
