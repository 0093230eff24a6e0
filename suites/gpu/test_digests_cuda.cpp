// The digests' kernel on a real GPU (trainer/measure/digest_hash.cu): for every dtype width, a tensor of more than
// one chunk, tails past the last 16-byte vector, an unaligned start, a strided tensor and an empty one, the digest computed on the device equals the host loop's over the same
// bits, and it reads the tensor behind the work queued to produce it (stream order, no sync of its own).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 changes one element of the host side's copy, so the test fails.
#include <ATen/ATen.h>
#include <ATen/cuda/Sleep.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "trainer/common/error.h"
#include "trainer/measure/digests.h"

namespace loopgate {
namespace {

std::vector<uint64_t> digests_of(const std::vector<at::Tensor>& tensors) {
  DigestLog log;
  for (const at::Tensor& t : tensors) log.add("t", "output", t);
  std::vector<uint64_t> out;
  for (const DigestRecord& r : log.collect()) out.push_back(r.digest);
  return out;
}

TEST(DigestsOnDevice, EqualTheHostLoopForEveryWidthChunkAndLayout) {
  ASSERT_TRUE(at::hasCUDA()) << "a gpu-labelled test needs a GPU";
  at::manual_seed(7);
  const std::vector<at::Tensor> host = {
      at::randn({1000}),                                      // 4-byte words, 16-byte vectors
      at::randn({70001}).to(at::kBFloat16),                   // 2-byte elements, two chunks, a tail
      at::randn({40000}, at::kDouble),                        // 8-byte elements: 80,000 words, two chunks
      at::rand({17}).gt(0.5),                                 // bool
      at::randint(0, 255, {300}, at::kByte),                  // 1-byte, a tail
      at::arange(5, at::kLong),
      at::randn({300, 200}).t(),                              // strided: copied contiguous first
      at::empty({0}),                                         // no words: digest 0
      at::randn({1003}),                                      // narrowed below: an unaligned start, word by word
  };
  std::vector<at::Tensor> uploaded, device, expected = host;
  for (const at::Tensor& t : host) uploaded.push_back(t.to(at::kCUDA));
  // The tensors hashed are copies made behind ~20 ms of spinning on the stream: a hash that did not run in stream
  // order behind them would read fresh, unwritten memory.
  at::cuda::sleep(40'000'000);
  for (const at::Tensor& t : uploaded) device.push_back(t.clone());
  expected.back() = expected.back().narrow(0, 3, 1000);
  device.back() = device.back().narrow(0, 3, 1000);
  if (std::getenv("LOOPGATE_WRONG_EXPECTATIONS")) {
    expected[0] = host[0].clone();
    expected[0][3] = 1.5f;
  }
  const std::vector<uint64_t> on_host = digests_of(expected), on_device = digests_of(device);
  ASSERT_EQ(on_device.size(), on_host.size());
  for (size_t i = 0; i < on_host.size(); ++i)
    EXPECT_EQ(on_device[i], on_host[i]) << "tensor " << i << " (" << host[i].scalar_type() << ")";
  EXPECT_EQ(on_host[7], 0u);
}

}  // namespace
}  // namespace loopgate
