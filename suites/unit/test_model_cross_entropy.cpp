// vocab_parallel_cross_entropy on one rank equals log_softmax + nll (forward and grad): its hand-written
// backward is the one piece of the single-rank reference model that autograd does not derive.
#include <gtest/gtest.h>
#include <mpi.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "trainer/model/cross_entropy.h"
#include "trainer/parallel/comm_mpi.h"

namespace loopgate {
namespace {

TEST(ModelCrossEntropy, MatchesLogSoftmaxNllOnOneRank) {
  CommPtr self = make_mpi_comm(MPI_COMM_SELF);
  at::manual_seed(3);
  at::Tensor logits = (at::randn({5, 3, 11}) * 4).set_requires_grad(true);  // [s, b, V]
  at::Tensor target = at::randint(11, {5, 3}, at::TensorOptions().dtype(at::kLong));
  at::Tensor weight = at::rand({5, 3});  // a non-uniform upstream grad
  at::Tensor loss = vocab_parallel_cross_entropy(logits, target, *self);
  torch::autograd::backward({(loss * weight).sum()});
  at::Tensor got_grad = logits.grad().clone();

  at::Tensor ref_logits = logits.detach().clone().set_requires_grad(true);
  at::Tensor ref = -at::log_softmax(ref_logits, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1);
  torch::autograd::backward({(ref * weight).sum()});
  EXPECT_TRUE(at::allclose(loss, ref, 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(got_grad, ref_logits.grad(), 1e-6, 1e-7));
}

}  // namespace
}  // namespace loopgate
