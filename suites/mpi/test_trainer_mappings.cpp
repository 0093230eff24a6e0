// The TP/SP mappings with closed-form answers (Megatron tests/unit_tests/tensor_parallel/test_mappings.py):
// every rank feeds a tensor filled with its own rank number (+1), so each forward and backward result is known
// exactly. The whole world is one TP group here; runs at every np.
#include <gtest/gtest.h>
#include <mpi.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "trainer/model/mappings.h"
#include "trainer/parallel/comm_mpi.h"

namespace loopgate {
namespace {

struct World {
  CommPtr tp = make_mpi_comm(MPI_COMM_WORLD);
  int r = tp->rank(), n = tp->size();
  double sum = n * (n + 1) / 2.0;  // sum over ranks of (rank + 1)
};

at::Tensor leaf(std::vector<int64_t> shape, double v) { return at::full(shape, v).set_requires_grad(true); }

// Backward with an upstream grad of (rank + 1) everywhere; returns the input's grad.
at::Tensor backprop(const at::Tensor& out, const at::Tensor& in, double g) {
  torch::autograd::backward({out}, {at::full(out.sizes(), g)});
  return in.grad();
}

TEST(TrainerMappings, CopyAndReduceAreAPair) {
  World w;
  at::Tensor x = leaf({3}, w.r + 1);
  at::Tensor y = copy_to_tensor_model_parallel_region(x, *w.tp);
  EXPECT_TRUE(at::equal(y, x));
  EXPECT_TRUE(at::allclose(backprop(y, x, w.r + 1), at::full({3}, w.sum)));  // backward all-reduce
  at::Tensor x2 = leaf({3}, w.r + 1);
  at::Tensor z = reduce_from_tensor_model_parallel_region(x2, *w.tp);
  EXPECT_TRUE(at::allclose(z, at::full({3}, w.sum)));                         // forward all-reduce
  EXPECT_TRUE(at::allclose(backprop(z, x2, w.r + 1), at::full({3}, w.r + 1.0)));  // backward identity
}

TEST(TrainerMappings, SequenceParallelScatterGatherReduceScatter) {
  World w;
  // scatter: keep rows [r, r+1) of an [n, 2] tensor whose row i holds i; backward all-gathers.
  at::Tensor full = at::arange(w.n, at::kFloat).unsqueeze(1).repeat({1, 2}).set_requires_grad(true);
  at::Tensor mine = scatter_to_sequence_parallel_region(full, *w.tp);
  EXPECT_TRUE(at::equal(mine, at::full({1, 2}, static_cast<double>(w.r))));
  at::Tensor g = backprop(mine, full, w.r + 1);
  EXPECT_TRUE(at::equal(g, (at::arange(w.n, at::kFloat) + 1).unsqueeze(1).repeat({1, 2})));
  // gather (tensor_parallel_output_grad): forward all-gather, backward reduce-scatter of partial grads.
  at::Tensor x = leaf({1, 2}, w.r + 1);
  at::Tensor gathered = gather_from_sequence_parallel_region(x, *w.tp, true);
  EXPECT_TRUE(at::equal(gathered, (at::arange(w.n, at::kFloat) + 1).unsqueeze(1).repeat({1, 2})));
  EXPECT_TRUE(at::allclose(backprop(gathered, x, w.r + 1), at::full({1, 2}, w.sum)));
  // without it: backward keeps this rank's rows of the (identical) grad.
  at::Tensor x3 = leaf({1, 2}, w.r + 1);
  at::Tensor gathered3 = gather_from_sequence_parallel_region(x3, *w.tp, false);
  EXPECT_TRUE(at::allclose(backprop(gathered3, x3, 5.0), at::full({1, 2}, 5.0)));
  // reduce-scatter: forward sums then keeps rows [r, r+1), backward all-gathers.
  at::Tensor y = leaf({w.n, 2}, w.r + 1);
  at::Tensor rs = reduce_scatter_to_sequence_parallel_region(y, *w.tp);
  EXPECT_TRUE(at::allclose(rs, at::full({1, 2}, w.sum)));
  at::Tensor gy = backprop(rs, y, w.r + 1);
  EXPECT_TRUE(at::equal(gy, (at::arange(w.n, at::kFloat) + 1).unsqueeze(1).repeat({1, 2})));
}

TEST(TrainerMappings, LastDimScatterGather) {
  World w;
  at::Tensor x = leaf({2, 1}, w.r + 1);
  at::Tensor gathered = gather_from_tensor_model_parallel_region(x, *w.tp);  // [2, n]: column i holds i+1
  EXPECT_TRUE(at::equal(gathered, (at::arange(w.n, at::kFloat) + 1).unsqueeze(0).repeat({2, 1})));
  EXPECT_TRUE(at::allclose(backprop(gathered, x, 3.0), at::full({2, 1}, 3.0)));
  at::Tensor full = leaf({2, w.n}, 1.0);
  at::Tensor mine = scatter_to_tensor_model_parallel_region(full, *w.tp);
  EXPECT_EQ(mine.size(1), 1);
  EXPECT_TRUE(at::allclose(backprop(mine, full, w.r + 1), (at::arange(w.n, at::kFloat) + 1).unsqueeze(0).repeat({2, 1})));
}

}  // namespace
}  // namespace loopgate
