// GradBuffer on one rank: bucket layout (reverse registration order, >= 4 buckets with the default size on
// every fixture layout of the default model), grads accumulated across microbatches, the ready callbacks
// fired once per bucket only after the last microbatch, and the fault hook running before the check hook.
#include <gtest/gtest.h>
#include <mpi.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "trainer/model/init.h"
#include "trainer/optim/grad_buffer.h"
#include "trainer/parallel/comm_mpi.h"

namespace loopgate {
namespace {

CommPtr self_comm() { return make_mpi_comm(MPI_COMM_SELF); }

Params three_params() {
  Params ps;
  for (int n : {3, 4, 5}) {
    Param p;
    p.name = "p" + std::to_string(n);
    p.value = at::zeros({n}).set_requires_grad(true);
    ps.push_back(p);
  }
  return ps;
}

// loss = sum_i c * sum(p_i): every grad element gets c.
void backward_with(const Params& ps, double c) {
  at::Tensor loss = at::zeros({});
  for (const Param& p : ps) loss = loss + p.value.sum() * c;
  torch::autograd::backward({loss});
}

TEST(ModelGradBuffer, ReverseOrderAndBuckets) {
  Params ps = three_params();
  GradBuffer buf(ps, self_comm(), {4});
  // Reverse order: p5 (5 >= 4 closes bucket 0), then p4 (bucket 1), then p3 (last param closes bucket 2).
  ASSERT_EQ(buf.num_buckets(), 3);
  EXPECT_EQ(buf.bucket_params(0), std::vector<int>{2});
  EXPECT_EQ(buf.bucket_params(2), std::vector<int>{0});
  EXPECT_EQ(buf.numel(), 12);
  EXPECT_EQ(buf.param_grad(2).data_ptr(), buf.data().data_ptr());  // last registered comes first
  EXPECT_TRUE(ps[0].value.grad().is_same(buf.param_grad(0)));        // fp32 grad is the buffer view
}

TEST(ModelGradBuffer, AccumulatesAndFiresOncePerBucketOnLastMicrobatch) {
  Params ps = three_params();
  GradBuffer buf(ps, self_comm(), {4});
  std::vector<int> order;
  std::vector<double> seen;
  buf.before_bucket_ready = [&](int k, at::Tensor& g) {
    if (k == 1) g.fill_(NAN);  // the fault injector's poison lands before the check
  };
  buf.on_bucket_ready = [&](int k, at::Tensor& g) {
    order.push_back(k);
    seen.push_back(g[0].item<double>());
  };
  buf.zero();
  buf.set_grad_sync(false);
  backward_with(ps, 1.0);  // microbatch 0
  backward_with(ps, 2.0);  // microbatch 1
  EXPECT_TRUE(order.empty()) << "callbacks must wait for the last microbatch";
  buf.set_grad_sync(true);
  backward_with(ps, 4.0);  // last microbatch: hooks fire as grads land
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(buf.buckets_reduced_by_hook(), 3);
  EXPECT_DOUBLE_EQ(seen[0], 7.0);  // 1 + 2 + 4 accumulated, local (pre-DP)
  buf.finish_grad_sync();          // nothing left to reduce: no second callback
  EXPECT_EQ(order.size(), 3u);
  EXPECT_TRUE(std::isnan(buf.param_grad(1)[0].item<double>()));
  EXPECT_DOUBLE_EQ(buf.param_grad(0)[2].item<double>(), 7.0);
  buf.zero();
  EXPECT_EQ(buf.data().abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(ps[1].value.grad().is_same(buf.param_grad(1)));
}

TEST(ModelGradBuffer, NonFloatParamsFoldIntoFp32Buffer) {
  Params ps = three_params();
  for (Param& p : ps) p.value = at::zeros(p.value.sizes(), at::kDouble).set_requires_grad(true);
  GradBuffer buf(ps, self_comm(), {100});
  buf.zero();
  backward_with(ps, 0.5);
  backward_with(ps, 0.25);
  buf.finish_grad_sync();
  EXPECT_EQ(buf.num_buckets(), 1);
  EXPECT_DOUBLE_EQ(buf.param_grad(2)[4].item<double>(), 0.75);
  EXPECT_FALSE(ps[2].value.grad().defined());
}

// bf16 params (the GPU tier's): each microbatch's bf16 grad is added to the fp32 buffer in float (the cast is exact),
// as Megatron's main_grad.add_(grad) does: the sum of the float values of the two bf16 grads, not a bf16 sum.
TEST(ModelGradBuffer, Bf16GradsAccumulateInFloat) {
  Params ps = three_params();
  for (Param& p : ps) p.value = at::zeros(p.value.sizes(), at::kBFloat16).set_requires_grad(true);
  GradBuffer buf(ps, self_comm(), {100});
  buf.zero();
  const double c1 = 1.0 + 1.0 / 128, c2 = 1.0 / 256;  // bf16 holds both; their bf16 sum would round c2 away
  backward_with(ps, c1);
  backward_with(ps, c2);
  buf.finish_grad_sync();
  const float want = static_cast<float>(c1) + static_cast<float>(c2);
  EXPECT_EQ(buf.param_grad(1)[2].item<float>(), want);
  EXPECT_NE(want, at::tensor({static_cast<float>(c1)}).to(at::kBFloat16).add(c2).item<float>());
  EXPECT_FALSE(ps[1].value.grad().defined());
}

// The default bucket size must give every rank of every fixture layout >= 4 buckets on the default model.
TEST(ModelGradBuffer, DefaultSizeGivesAtLeastFourBucketsPerRank) {
  struct Case { const char* name; int world; LayoutConfig lc; };
  const Case cases[] = {{"single", 1, {1, 1, false}}, {"tp2sp", 2, {2, 1, true}}, {"pp2", 2, {1, 2, false}},
                        {"pp4", 4, {1, 4, false}},    {"pp2tp2dp2", 8, {2, 2, true}}, {"dp64", 64, {1, 1, false}}};
  ModelConfig cfg;
  for (const Case& c : cases) {
    Layout layout = Layout::build(c.world, c.lc);
    int fewest = 1 << 30;
    for (int r = 0; r < layout.world(); r += layout.dp() > 1 ? layout.tp() * layout.dp() : 1) {
      Params ps = init_stage_params(cfg, layout, r);
      GradBuffer buf(ps, self_comm());
      fewest = std::min(fewest, buf.num_buckets());
    }
    EXPECT_GE(fewest, 4) << c.name;
    std::printf("[ grad buffer ] %-10s fewest buckets per rank with bucket_size %lld: %d\n", c.name,
                static_cast<long long>(kDefaultBucketSize), fewest);
  }
}

}  // namespace
}  // namespace loopgate
