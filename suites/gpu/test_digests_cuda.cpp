// The digests' kernel on a real GPU (trainer/measure/digest_hash.cu): for every dtype width, a tensor of more than
// one chunk, tails past the last 16-byte vector, an unaligned start, a strided tensor and an empty one, the digest computed on the device equals the host loop's over the same
// bits, and it reads the tensor behind the work queued to produce it (stream order, no sync of its own). Also the
// parameters' checksum on device tensors against its CPU known answer.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 changes one element of the host side's copy (the checksum test: one
// tensor's values), so each test fails.
#include <ATen/ATen.h>
#include <ATen/cuda/Sleep.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "trainer/common/error.h"
#include "trainer/measure/digests.h"
#include "trainer/measure/ledger.h"

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

// The parameters' checksum (trainer/measure/ledger.cpp) takes device tensors to the host in one copy per dtype and
// hashes each tensor's slice of that copy. It must give what CPU tensors hashed where they lie give: the CPU unit
// test's known answer for the same five tensors (suites/unit/test_measure_ledger.cpp), all on the GPU, and with the
// long one left on the CPU between two dtypes that travel.
TEST(ChecksumOnDevice, EqualsTheHostKnownAnswerOneCopyPerDtype) {
  ASSERT_TRUE(at::hasCUDA()) << "a gpu-labelled test needs a GPU";
  const at::Tensor m = at::arange(35, at::kFloat).reshape({5, 7});
  std::vector<at::Tensor> host = {m.t(), at::arange(5, at::kLong), m.narrow(0, 2, 3),
                                  m.to(at::kBFloat16).narrow(1, 1, 3), at::ones({0})};
  if (std::getenv("LOOPGATE_WRONG_EXPECTATIONS")) host[2] = host[2] + 1;
  std::vector<at::Tensor> device, mixed;
  for (const at::Tensor& t : host) device.push_back(t.to(at::kCUDA));
  EXPECT_FALSE(device[0].is_contiguous()) << "the transposed tensor must reach the checksum strided";
  mixed = device;
  mixed[1] = host[1];
  const uint64_t known = 0x83174116edd51a14ull;  // suites/unit/test_measure_ledger.cpp
  EXPECT_EQ(tensor_checksum(device), known);
  EXPECT_EQ(tensor_checksum(mixed), known);
}

}  // namespace
}  // namespace loopgate
