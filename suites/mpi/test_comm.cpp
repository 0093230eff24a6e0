// Every Comm collective on every group of every layout that fits this launch's world size, with values chosen
// so float sums are exact in any order (small integers): closed-form expectations, as nccl-tests' verifiable.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include "fixtures/scenarios.h"  // world_rank(), world_size()
#include "trainer/parallel/comm_mpi.h"
#include "trainer/parallel/comm_shm.h"
#include "trainer/parallel/recorded_comm.h"

namespace loopgate {
namespace {

std::vector<LayoutConfig> layouts_for(int world) {
  std::vector<LayoutConfig> out;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4})
      if (world % (tp * pp) == 0) out.push_back({tp, pp, tp > 1});
  return out;
}

// Checks all collectives on one group `c` whose members (world ranks) are `members`.
void check_group(Comm& c, const std::vector<int>& members, const std::string& what) {
  SCOPED_TRACE(what);
  const int n = c.size();
  ASSERT_EQ(static_cast<size_t>(n), members.size());
  ASSERT_EQ(c.world_ranks(), members);
  const int me = world_rank();
  ASSERT_EQ(members[c.rank()], me);
  long sum_ranks = 0;
  for (int m : members) sum_ranks += m;

  at::Tensor t = at::full({5}, static_cast<float>(me), at::kFloat);
  c.all_reduce(t, ReduceOp::kSum);
  EXPECT_TRUE(at::equal(t, at::full({5}, static_cast<float>(sum_ranks))));
  at::Tensor mx = at::full({3}, static_cast<double>(me), at::kDouble);
  c.all_reduce(mx, ReduceOp::kMax);
  EXPECT_EQ(mx[0].item<double>(), members.back());
  at::Tensor mn = at::full({3}, static_cast<long>(me), at::kLong);
  c.all_reduce(mn, ReduceOp::kMin);
  EXPECT_EQ(mn[2].item<long>(), members.front());

  at::Tensor g = c.all_gather(at::full({2, 3}, static_cast<float>(me)));
  ASSERT_EQ(g.sizes(), (std::vector<int64_t>{2L * n, 3}));
  for (int i = 0; i < n; ++i) EXPECT_EQ(g[2 * i][1].item<float>(), members[i]) << "slot " << i;

  // reduce_scatter: element j of the full tensor = rank + j; this rank gets slice [rank*2, rank*2+2).
  at::Tensor full = at::arange(2 * n, at::kFloat).add_(static_cast<float>(me));
  at::Tensor part = c.reduce_scatter(full, ReduceOp::kSum);
  ASSERT_EQ(part.numel(), 2);
  for (int j = 0; j < 2; ++j)
    EXPECT_EQ(part[j].item<float>(), static_cast<float>(sum_ranks + n * (c.rank() * 2 + j)));

  at::Tensor b = at::full({4}, static_cast<float>(me));
  c.broadcast(b, n - 1);
  EXPECT_EQ(b[3].item<float>(), members.back());

  // send/recv around a ring inside the group, then send_recv the other way.
  if (n > 1) {
    int next = (c.rank() + 1) % n, prev = (c.rank() + n - 1) % n;
    at::Tensor out = at::full({3}, static_cast<float>(me));
    at::Tensor in = at::empty({3}, at::kFloat);
    if (c.rank() % 2 == 0) {
      c.send(out, next);
      c.recv(in, prev);
    } else {
      c.recv(in, prev);
      c.send(out, next);
    }
    EXPECT_EQ(in[0].item<float>(), members[prev]);
    at::Tensor in2 = at::empty({3}, at::kFloat);
    c.send_recv(out, prev, in2, next);
    EXPECT_EQ(in2[1].item<float>(), members[next]);
  }
  c.barrier();
}

// Both CPU backends, built the same way.
ProcessGroups make_groups(CpuComm backend, const Layout& l, const CommOptions& o = {}) {
  return backend == CpuComm::kShm ? make_shm_groups(l, MPI_COMM_WORLD, o) : make_mpi_groups(l, MPI_COMM_WORLD, o);
}
CommPtr make_comm(CpuComm backend, const CommOptions& o) {
  return backend == CpuComm::kShm ? make_shm_comm(MPI_COMM_WORLD, o) : make_mpi_comm(MPI_COMM_WORLD, o);
}

class CommBackend : public ::testing::TestWithParam<CpuComm> {};
INSTANTIATE_TEST_SUITE_P(Cpu, CommBackend, ::testing::Values(CpuComm::kMpi, CpuComm::kShm),
                         [](const auto& info) { return std::string(cpu_comm_name(info.param)); });

TEST_P(CommBackend, EveryCollectiveOnEveryGroupOfEveryLayout) {
  const int world = world_size(), me = world_rank();
  for (const LayoutConfig& cfg : layouts_for(world)) {
    Layout l = Layout::build(world, cfg);
    ProcessGroups g = make_groups(GetParam(), l);
    check_group(*g.world, l.world_group(), "world " + l.describe());
    check_group(*g.tp, l.tp_group(me), "tp " + l.describe());
    check_group(*g.dp, l.dp_group(me), "dp " + l.describe());
    check_group(*g.pp, l.pp_group(me), "pp " + l.describe());
    check_group(*g.mp, l.mp_group(me), "mp " + l.describe());
  }
}

// Fixed order: every rank gets bits equal to the left-to-right sum r0 + r1 + ... computed locally, for values
// whose sum is NOT order-independent.
TEST_P(CommBackend, FixedOrderSumEqualsLeftToRightSum) {
  const int world = world_size(), me = world_rank();
  auto value = [](int r) { return 1.0f / static_cast<float>(3 + r) + (r % 3 == 0 ? 1e6f : 0.0f); };
  CommPtr c = make_comm(GetParam(), {ReduceOrder::kFixed, 0});
  at::Tensor t = at::full({1}, value(me));
  c->all_reduce(t);
  float expect = value(0);
  for (int r = 1; r < world; ++r) expect += value(r);
  EXPECT_EQ(t[0].item<float>(), expect);
}

// Permuted order: all ranks agree on the bits of each call (same seed, same call counter).
TEST_P(CommBackend, PermutedOrderAgreesAcrossRanks) {
  const int me = world_rank();
  CommPtr c = make_comm(GetParam(), {ReduceOrder::kPermuted, 42});
  CommPtr check = make_mpi_comm(MPI_COMM_WORLD);
  for (int call = 0; call < 4; ++call) {
    at::Tensor t = at::full({8}, 1.0f / static_cast<float>(3 + me) + (me % 3 == 0 ? 1e6f : 0.0f));
    c->all_reduce(t);
    at::Tensor lo = t.clone(), hi = t.clone();
    check->all_reduce(lo, ReduceOp::kMin);
    check->all_reduce(hi, ReduceOp::kMax);
    EXPECT_TRUE(at::equal(lo, hi)) << "call " << call;
  }
}

// A tensor large enough to be summed a slice per rank (and not a multiple of the group size) gets the bits of the
// whole gathered tensor summed in the same order on one rank: slicing must not change any element's order.
TEST_P(CommBackend, SlicedOrderedSumEqualsWholeGatherSum) {
  const int world = world_size(), me = world_rank();
  for (ReduceOrder order : {ReduceOrder::kFixed, ReduceOrder::kPermuted}) {
    const CommOptions opts{order, 7};
    CommPtr c = make_comm(GetParam(), opts);
    CommPtr plain = make_mpi_comm(MPI_COMM_WORLD);
    const int64_t n = 64 * world + 37;
    at::Tensor idx = at::arange(n, at::kFloat);
    at::Tensor t = (1.0f / (idx + 3.0f + static_cast<float>(me))) + (me % 3 == 0 ? 1e4f : 0.0f);
    at::Tensor parts = plain->all_gather(t.view({1, n}));
    at::Tensor got = t.clone();
    c->all_reduce(got);
    at::Tensor want = sum_in_order(parts, opts, c->calls());  // the call counter the all-reduce used
    EXPECT_TRUE(at::equal(got, want)) << "order " << static_cast<int>(order) << " on " << world
                                      << " ranks: sliced sum differs from the whole-gather sum";
  }
}

// The shm backend against MPI's ordered sums, bit for bit, on values whose sum depends on the order: every collective,
// sizes from one element to past the segment's first capacity (its growth), a run of calls that alternates the
// buffers' halves. The largest size skips all_gather (64 ranks would hold 64 copies of 64 inputs).
TEST(ShmComm, EqualsMpiBitForBit) {
  const int me = world_rank();
  for (ReduceOrder order : {ReduceOrder::kNative, ReduceOrder::kFixed, ReduceOrder::kPermuted}) {
    const CommOptions opts{order, 11};
    const CommOptions mpi_opts{order == ReduceOrder::kNative ? ReduceOrder::kFixed : order, 11};  // shm's native
    CommPtr shm = make_shm_comm(MPI_COMM_WORLD, opts), mpi = make_mpi_comm(MPI_COMM_WORLD, mpi_opts);
    constexpr int64_t kLarge = 70000;  // 280 KB of floats, 560 KB of doubles: over the first 256 KB
    for (int64_t n : {1L, 37L, 256L, 257L, 4099L, kLarge}) {
      SCOPED_TRACE(fmt::format("order {} n {}", static_cast<int>(order), n));
      at::Tensor idx = at::arange(n, at::kFloat);
      at::Tensor x = (1.0f / (idx + 3.0f + static_cast<float>(me))) + (me % 3 == 0 ? 1e4f : 0.0f);
      auto both = [&](auto&& op) {
        at::Tensor a = op(*shm), b = op(*mpi);
        EXPECT_TRUE(at::equal(a, b)) << "max |diff| " << (a - b).abs().max().item<float>();
      };
      both([&](Comm& c) { at::Tensor t = x.clone(); c.all_reduce(t); return t; });
      both([&](Comm& c) { at::Tensor t = x.to(at::kDouble); c.all_reduce(t); return t; });
      both([&](Comm& c) { at::Tensor t = x.clone(); c.all_reduce(t, ReduceOp::kMax); return t; });
      both([&](Comm& c) { at::Tensor t = x.clone(); c.all_reduce(t, ReduceOp::kMin); return t; });
      both([&](Comm& c) { at::Tensor t = (idx * (me + 1)).to(at::kLong); c.all_reduce(t); return t; });
      both([&](Comm& c) { at::Tensor t = (idx.remainder(me + 2) == 0); c.all_reduce(t, ReduceOp::kMax); return t; });
      if (n < kLarge) both([&](Comm& c) { return c.all_gather(x); });
      if (n % world_size() == 0 || n == kLarge) {
        at::Tensor y = at::cat({x, x}).narrow(0, 0, n / world_size() * world_size()).contiguous();
        if (y.numel() > 0) both([&](Comm& c) { return c.reduce_scatter(y); });
      }
      both([&](Comm& c) { at::Tensor t = x.clone(); c.broadcast(t, world_size() - 1); return t; });
      EXPECT_EQ(shm->calls(), mpi->calls());
    }
  }
}

// A collective whose size differs on one rank: every rank of the shm group refuses it with both sizes named, and the
// group goes on working.
TEST(ShmComm, SizeMismatchRefusedOnEveryRank) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  CommPtr c = make_shm_comm(MPI_COMM_WORLD, {ReduceOrder::kFixed, 0});
  at::Tensor t = at::ones({world_rank() == 0 ? 10 : 12}, at::kFloat);
  try {
    c->all_reduce(t, ReduceOp::kSum);
    ADD_FAILURE() << "rank " << world_rank() << " took a mismatched all_reduce";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shm collective mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("of 40 bytes"), std::string::npos) << e.what();
  }
  at::Tensor ok = at::ones({3}, at::kFloat);
  c->all_reduce(ok);
  EXPECT_EQ(ok[0].item<float>(), static_cast<float>(world_size()));
}

// A collective issued with another size on one rank. The transport refuses it on some rank (Open MPI: a
// truncation where the buffer is the smaller) and goes through on others; the record says "failed in" the call
// there, and the ranks' lines, as the gate reads them, name the mismatch with each rank's size.
TEST(Comm, SizeMismatchIsNamedFromTheRecords) {
  if (world_size() != 2) GTEST_SKIP() << "a two-rank case";
  MPI_Comm dup;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &dup), MPI_SUCCESS);
  auto log = std::make_shared<CollectiveLog>();
  CommPtr c = recorded_comm(make_mpi_comm(dup, {}, /*own=*/true), "world", log);
  at::Tensor t = at::ones({world_rank() == 0 ? 10 : 12}, at::kFloat);
  int threw = 0;
  try {
    c->all_reduce(t, ReduceOp::kSum);
  } catch (const Error&) {
    threw = 1;
  }
  int any = 0;
  MPI_Allreduce(&threw, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  EXPECT_EQ(any, 1) << "the transport took a mismatched all_reduce without an error";
  // Every rank's line, gathered over a healthy communicator.
  char mine[512] = {};
  std::snprintf(mine, sizeof mine, "%s", log->where().c_str());
  char all[2][512] = {};
  MPI_Allgather(mine, 512, MPI_CHAR, all, 512, MPI_CHAR, MPI_COMM_WORLD);
  const std::map<int, std::string> where = {{0, all[0]}, {1, all[1]}};
  EXPECT_EQ(mismatched_call(where), "size mismatch in world#0 all_reduce.sum #0: rank 0 Float[10], rank 1 Float[12]")
      << all[0] << " | " << all[1];
  if (threw) EXPECT_EQ(std::string(mine).rfind("failed in world#0 all_reduce.sum Float[", 0), 0u) << mine;
}

}  // namespace
}  // namespace loopgate
