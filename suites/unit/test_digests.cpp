// Unit tests for digests and the first divergence: a digest is the same for the same bits wherever the tensor sits
// in its batch, and changes with one flipped bit or two swapped elements; the Trace line round trip; and the
// localization on hand-made Traces — a module whose inputs match, a collective whose inputs match on every rank, a
// divergence that arrives through an input, records only one side took.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "fixtures/defects/mutations.h"
#include "fixtures/localize.h"
#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/measure/digest_hash.h"
#include "trainer/measure/digests.h"

namespace loopgate {
namespace {

uint64_t digest_of(const std::vector<at::Tensor>& batch, size_t which) {
  DigestLog log;
  for (const at::Tensor& t : batch) log.add("t", "output", t);
  return log.collect().at(which).digest;
}

TEST(Digests, SameBitsSameDigestWhereverInTheBatch) {
  const at::Tensor x = at::arange(1000, at::kFloat).mul(0.37);
  const uint64_t alone = digest_of({x}, 0);
  EXPECT_EQ(digest_of({at::ones({77}), x}, 1), alone + static_cast<uint64_t>(wrong()));
  EXPECT_EQ(digest_of({x.clone(), at::zeros({3}, at::kLong)}, 0), alone);
}

TEST(Digests, OneFlippedBitOrOneSwappedPairChangesIt) {
  const at::Tensor x = at::arange(64, at::kFloat).mul(1.5);
  const uint64_t d = digest_of({x}, 0);
  at::Tensor flipped = x.clone();
  int32_t bits;
  std::memcpy(&bits, flipped.data_ptr<float>() + 10, 4);
  bits ^= wrong() ? 0 : 1;  // the last mantissa bit
  std::memcpy(flipped.data_ptr<float>() + 10, &bits, 4);
  EXPECT_NE(digest_of({flipped}, 0), d);
  at::Tensor swapped = x.clone();
  if (!wrong()) std::swap(swapped.data_ptr<float>()[3], swapped.data_ptr<float>()[4]);
  EXPECT_NE(digest_of({swapped}, 0), d);
}

// Strided temporaries added one after the other: each is gone when the next is made, so the next one's TensorImpl
// may take its address (with the same version, 0). The log holds every strided tensor it was handed until the
// flush, so it never takes one for another: 64 tensors, 64 right digests.
TEST(Digests, AStridedTemporaryIsNotTakenForTheNext) {
  std::vector<at::Tensor> bases;
  for (int k = 0; k < 64; ++k) bases.push_back(at::arange(12, at::kFloat).reshape({3, 4}).add(k));
  DigestLog log;
  for (const at::Tensor& b : bases) log.add("b", "output", b.t());
  const std::vector<DigestRecord> r = log.collect();
  ASSERT_EQ(r.size(), bases.size());
  for (size_t k = 0; k < bases.size(); ++k)
    EXPECT_EQ(r[k].digest, digest_of({bases[k].t().contiguous()}, 0) + static_cast<uint64_t>(wrong() && k == 5))
        << "tensor " << k;
}

TEST(Digests, EveryDtypeHashes) {
  for (const at::Tensor& t : {at::ones({5}, at::kDouble), at::ones({5}, at::kHalf), at::ones({5}, at::kBool),
                              at::ones({5}, at::kLong), at::ones({5}, at::kByte)})
    EXPECT_NE(digest_of({t}, 0), wrong() ? digest_of({t}, 0) : 0u) << t.scalar_type();
}

// The kernel's aligned path reads 16 bytes at a time and splits the words out by width; over the same bytes it must
// sum to what the word-by-word path (the host loop, and the kernel's unaligned rest) gives, for every width.
// The kernel's arithmetic (digest_hash.cu), run here: each of `threads` takes every threads-th 16-byte vector from
// the chunk's start when it is aligned, the rest word by word, and its DigestSums become its part of the digest.
uint64_t kernel_form(const DigestChunk& c, int64_t threads) {
  const int64_t unit = digest_word_bytes(c.elem_size), per_vector = 16 / unit;
  const auto first = static_cast<uintptr_t>(c.data) + static_cast<uintptr_t>(c.first_word * unit);
  const int64_t vectors = first % 16 == 0 ? c.words / per_vector : 0;
  uint64_t sum = 0;
  for (int64_t t = 0; t < threads; ++t) {
    DigestSums s;
    for (int64_t k = t; k < vectors; k += threads)
      digest_add_vector(s, reinterpret_cast<const uint32_t*>(first) + 4 * k, static_cast<uint32_t>(k * per_vector),
                        unit);
    for (int64_t k = vectors * per_vector + t; k < c.words; k += threads)
      digest_add_word(s, digest_word(c, k), static_cast<uint32_t>(k));
    sum += digest_from_sums(s, c.first_word);
  }
  return sum;
}

// Every form of the hash equals its definition (the sum of digest_term): the kernel's vectors and words, split over
// threads, and the host loop; for every element width, chunks starting at even and odd words, aligned or not.
TEST(DigestHash, KernelAndHostFormsEqualTheDefinitionForEveryWidth) {
  alignas(16) uint32_t bytes[1024];
  for (uint32_t i = 0; i < 1024; ++i) bytes[i] = (0x9E3779B9u * (i + 1)) ^ 0x5bd1e995u ^ (i << 7);
  for (int32_t elem_size : {1, 2, 4, 8}) {
    const int64_t unit = digest_word_bytes(elem_size), per_vector = 16 / unit;
    for (int64_t first_word : {int64_t{0}, 3 * per_vector, int64_t{1}, int64_t{7}}) {
      const DigestChunk c{reinterpret_cast<int64_t>(bytes), first_word, 200 * per_vector + 3, elem_size, 0};
      uint64_t definition = 0;
      for (int64_t k = 0; k < c.words; ++k) definition += digest_term(c, k);
      uint64_t host = 0;
      digest_chunks_host(&c, 1, &host);
      const std::string at = fmt::format("element size {}, first word {}", elem_size, first_word);
      EXPECT_EQ(host, definition + static_cast<uint64_t>(wrong())) << at;
      for (int64_t threads : {1, 7, 256}) EXPECT_EQ(kernel_form(c, threads), definition) << at << ", threads " << threads;
    }
  }
}

TEST(Digests, LineRoundTripAndErrors) {
  DigestRecord r;
  r.iteration = 3;
  r.microbatch = 2;
  r.phase = DigestPhase::kBackward;
  r.name = "layers.1.mlp.linear_fc1";
  r.what = "output";
  r.digest = 0x0123456789abcdefULL;
  EXPECT_EQ(to_string(r), wrong() ? "" : "2 backward layers.1.mlp.linear_fc1 output 0x0123456789abcdef");
  EXPECT_TRUE(parse_digest_record(to_string(r), 3) == r);
  for (const char* bad : {"2 sideways x output 0x0123456789abcdef", "2 forward x output 0x12", "x forward y input 0x0123456789abcdef",
                          "2 forward x both 0x0123456789abcdef"})
    EXPECT_THROW(parse_digest_record(bad, 1), InputError) << bad;
}

// The planted module defects must change the GPU tier's bf16 activations too: a 2^-10 scale rounds away in bf16's
// 8 bits (the first GPU run of defect-numerics-fc1-backward passed equivalence that way), 2^-6 does not.
TEST(PlantedModuleScale, ChangesBf16AndFloat32) {
  const int rank = world_rank_for_errors();
  world_rank_for_errors() = 0;
  set_current_iteration(1);
  const auto scale = scale_module(0, "mlp.linear_fc1", Boundary::kBackwardOutput, 0);
  for (at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    const at::Tensor t = at::linspace(-3.0, 3.0, 257).to(dtype);
    const at::Tensor scaled = scale({0, "mlp.linear_fc1"}, Boundary::kBackwardOutput, t);
    const int64_t changed = scaled.ne(t).sum().item<int64_t>();
    EXPECT_GE(changed, wrong() ? 257 : 200) << dtype << ": only " << changed << " of 257 values changed";
    EXPECT_TRUE(scale({1, "mlp.linear_fc1"}, Boundary::kBackwardOutput, t).equal(t)) << "another layer changed";
  }
  set_current_iteration(0);
  world_rank_for_errors() = rank;
}

// Two ranks, iteration 1: a module (input, output) then a collective over both ranks (input, output).
Trace two_rank_digests(const std::string& arm) {
  Trace t;
  t.arm = arm;
  for (int rank = 0; rank < 2; ++rank) {
    IterationRecord r;
    r.iteration = 1;
    r.rank = rank;
    r.coord = "tp " + std::to_string(rank) + ", pp 0, dp 0";
    for (const char* line : {"0 forward layers.0.mlp.linear_fc1 input 0x0000000000000001",
                             "0 forward layers.0.mlp.linear_fc1 output 0x0000000000000002",
                             "0 forward tp#0.all_reduce.sum@numerics input 0x0000000000000003",
                             "0 forward tp#0.all_reduce.sum@numerics output 0x0000000000000004",
                             "-1 log world#0.all_gather@timers output 0x0000000000000005"})
      r.digests.push_back(parse_digest_record(line, 1));
    t.records.push_back(r);
  }
  return t;
}

TEST(FirstDivergence, AModuleWhoseInputsMatch) {
  const Trace a = two_rank_digests("baseline");
  Trace b = two_rank_digests("cand");
  b.records[1].digests[1].digest = 9;  // rank 1's fc1 output, so its all-reduce input
  b.records[1].digests[2].digest = 9;
  b.records[0].digests[3].digest = 9;  // and the all-reduce's output on both ranks: not a root (rank 1's input)
  b.records[1].digests[3].digest = 9;
  const auto d = first_divergence(a, b);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->describe(), wrong() ? "" : "iteration 1, rank 1 (tp 1, pp 0, dp 0), microbatch 0, forward, layer 0 "
                                          "mlp.linear_fc1: output differs, inputs identical");
}

TEST(FirstDivergence, ACollectiveWhoseInputsMatchOnEveryRank) {
  const Trace a = two_rank_digests("baseline");
  Trace b = two_rank_digests("cand");
  for (IterationRecord& r : b.records) r.digests[3].digest = 9;
  b.records[0].digests[4].digest = 7;  // a timers gather: host times, never compared
  const auto d = first_divergence(a, b);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->collective);
  EXPECT_EQ(d->describe(), wrong() ? "" : "iteration 1, rank 0 (tp 0, pp 0, dp 0), microbatch 0, forward, collective "
                                          "tp#0.all_reduce.sum@numerics: output differs, inputs identical on every "
                                          "rank of the group; the same on rank(s) 1");
}

TEST(FirstDivergence, NoneWhenOnlyUncomparedRecordsDiffer) {
  const Trace a = two_rank_digests("baseline");
  Trace b = two_rank_digests("cand");
  b.records[0].digests[wrong() ? 1 : 4].digest = 7;
  b.records[1].digests.push_back(parse_digest_record("-1 log only_here output 0x0000000000000009", 1));
  EXPECT_FALSE(first_divergence(a, b).has_value());
  b.records[0].digests[0].digest = 8;  // an input differs with nothing before it: said so, not a root
  const auto d = first_divergence(a, b);
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->inputs_identical);
  EXPECT_NE(d->describe().find("input differs"), std::string::npos) << d->describe();
}

TEST(FirstDivergence, ATraceWithoutDigestsIsRefused) {
  Trace a = two_rank_digests("baseline");
  if (!wrong())
    for (IterationRecord& r : a.records) r.digests.clear();
  EXPECT_THROW(first_divergence(a, two_rank_digests("cand")), InputError);
}

}  // namespace
}  // namespace loopgate
