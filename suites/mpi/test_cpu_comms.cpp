// The trainer on both CPU backends (comm.h CpuComm): the fixture of this launch's world, run on MpiComm and on
// ShmComm with sums in rank order, gives the same logged values, parameter checksums, host reads and operator counts
// on every rank, bit for bit. dp64 runs its collectives on ShmComm by default; this is what keeps `--cpu-comm mpi`
// its equal (CTest mpi_np64), and pp2tp2dp2's groups of 2, 4 and 8 with point-to-point (mpi_np8).
#include <gtest/gtest.h>

#include <map>

#include "fixtures/fixtures.h"
#include "fixtures/scenarios.h"  // world_rank(), world_size()
#include "trainer/parallel/comm_shm.h"

namespace loopgate {
namespace {

// The fixture this launch's world runs ("" for none).
std::string fixture_of_world() {
  const std::map<int, std::string> by_world = {{1, "single"}, {2, "tp2sp"}, {8, "pp2tp2dp2"}, {64, "dp64"}};
  const auto f = by_world.find(world_size());
  return f == by_world.end() ? "" : f->second;
}

TEST(CpuComms, TrainerRunsEqualBitForBit) {
  const std::string fixture = fixture_of_world();
  if (fixture.empty()) GTEST_SKIP() << "no fixture of " << world_size() << " ranks";
  RunConfig c = fixture_config(fixture);
  c.train_iters = 3;
  c.log_interval = 1;
  c.param_checksums = true;
  c.count_launches = true;
  c.comm.order = ReduceOrder::kFixed;
  Trace run[2];
  for (CpuComm backend : {CpuComm::kMpi, CpuComm::kShm}) {
    c.cpu_comm = backend;
    run[backend == CpuComm::kShm] = gather_trace(run_arm(c, "baseline"));
  }
  ASSERT_EQ(run[0].records.size(), run[1].records.size());
  ASSERT_FALSE(run[0].records.empty());
  for (size_t i = 0; i < run[0].records.size(); ++i) {
    const IterationRecord &a = run[0].records[i], &b = run[1].records[i];
    SCOPED_TRACE(fmt::format("{}: iteration {} rank {}", fixture, a.iteration, a.rank));
    ASSERT_EQ(a.iteration, b.iteration);
    ASSERT_EQ(a.rank, b.rank);
    for (const LoggedField& field : logged_fields()) {
      const double x = a.*field.member, y = b.*field.member;
      EXPECT_EQ(std::memcmp(&x, &y, sizeof x), 0) << field.name << ": " << x << " on mpi, " << y << " on shm";
    }
    EXPECT_EQ(a.param_checksum_after, b.param_checksum_after);
    EXPECT_EQ(a.skipped, b.skipped);
    EXPECT_EQ(a.reads_per_site, b.reads_per_site);
    EXPECT_EQ(a.launches_per_site, b.launches_per_site) << "the transport's own operators were counted";
  }
}

// The Trace gathered over a shared-memory world group equals MPI's gather, record for record and bit for bit (ranks
// whose Traces differ in size: the last rank holds the log lines).
TEST(CpuComms, TraceGatherOverShmEqualsMpis) {
  const std::string fixture = fixture_of_world();
  if (fixture.empty()) GTEST_SKIP() << "no fixture of " << world_size() << " ranks";
  RunConfig c = fixture_config(fixture);
  c.train_iters = 3;
  const RunResult r = run_arm(c, "baseline");
  CommPtr world = make_shm_comm(MPI_COMM_WORLD);
  const Trace over_mpi = gather_trace(r, MPI_COMM_WORLD), over_shm = gather_trace(r, *world);
  std::string why;
  EXPECT_TRUE(traces_equal(over_mpi, over_shm, &why)) << why;
  EXPECT_EQ(over_shm.records.size(), over_mpi.records.size());
  EXPECT_GE(over_shm.records.size(), static_cast<size_t>(3 * world_size()));
}

}  // namespace
}  // namespace loopgate
