// The BLAS warm-up the GPU tier runs before it may clear CUBLAS_WORKSPACE_CONFIG (trainer/common/device.h): on the
// CPU the same product and backward, so a warm-up that stops computing a gradient (an earlier form built its
// leaf without requires_grad and threw on every GPU rank) fails here, in CI, before a GPU runs it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "suites/unit/wrong.h"
#include "trainer/common/device.h"

namespace loopgate {
namespace {

TEST(DeviceWarmup, ProductAndBackwardGivesTheLeafsGradient) {
  const at::Tensor g = product_and_backward(c10::Device(c10::kCPU));
  ASSERT_TRUE(g.defined()) << "no gradient reached the leaf";
  // d/da sum(a a) = 1 a^T + a^T 1: with a of ones, 2 + 2 in every element.
  EXPECT_TRUE(at::equal(g, at::full({2, 2}, 4.0 + wrong())));
}

}  // namespace
}  // namespace loopgate
