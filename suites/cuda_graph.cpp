// Gate: cuda_graph. `--cuda-graph iteration` replays every iteration of an arm that reads nothing
// between log points (zerosync) as one captured CUDA graph, a log point's one batched read after its replay; the
// first two iterations and iterations a planned fault hits run eagerly (capture.h). A replay equals eager execution only if each replayed
// iteration would dispatch the captured operators with the captured host arguments on the same persistent
// tensors. On a GPU (--lg_device=cuda) the graph really replays and the bit-identity below is the proof; on CPU
// ranks the operator-stream check stands in (op_stream.h): each replayable iteration runs eagerly and must
// dispatch the captured stream exactly, or the run reports the first operator that differs.
// Checked, per arm that reads nothing between log points: the graph captured once and replayed at every
// replayable iteration (counted from the config, log points included), no host read at a replayed iteration but a
// log point's one batched read, every logged field and
// the parameter checksum bit-identical to the baseline; with a fault (abort and skip) the outcome, exit code,
// iterations run past the fault and every field equal to the same arm run eagerly. Power: defect-graph-host-lr
// (the LR as a host kernel argument: right eagerly, frozen in a graph) is rejected. Not proven on CPU: what
// CUDA does at capture (a read inside refuses it; the GPU tests and --capture-probe show that).
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>

#include "fixtures/compare.h"
#include "fixtures/faults/fault.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"
#include "trainer/common/device.h"
#include "trainer/loop/sites.h"

namespace loopgate {
namespace {

const std::vector<std::string> kFields = {"lm_loss", "params_norm", "grad_norm",           "num_zeros", "learning_rate",
                                          "loss_scale", "skipped", "param_checksum_after"};

// Log interval 4 over 10 iterations: log points 1, 4, 8; 3 (the capture), 5, 6, 7, 9, 10 run as the graph.
// dp64 (64 ranks on 2 cores): 6 iterations, log points 1 and 4; 3, 5, 6 as the graph.
RunConfig graph_config() {
  RunConfig c = gate_config();
  c.train_iters = heavy_fixture() ? 6 : 10;
  c.log_interval = 4;
  c.cuda_graph_iteration = true;
  c.count_launches = true;  // a read between log points, implicit syncs included, fails the graph's scenario
  return c;
}

// Replayable iterations of `c` (1-based), as the replayed step driver picks them for a clean run
// (trainer/loop/replay.cpp): every one from the third, log points included.
std::vector<int64_t> replayable(const RunConfig& c) {
  std::vector<int64_t> out;
  for (int64_t done = 3; done <= c.train_iters; ++done) out.push_back(done);
  return out;
}

// Where a graph run's bits part from the baseline's. The arm rerun eagerly: if it differs there too, the digests
// name the first record that differs (fixtures/localize.h); if it does not, the replay is the cause, and the
// digests cannot look further: a replayed iteration runs no host code to take them.
// graph_config() without the graph, and what `arm` run so logs differently from the baseline.
RunConfig eager_config() {
  RunConfig c = graph_config();
  c.cuda_graph_iteration = false;
  return c;
}
std::vector<Mismatch> eager_differences(const std::string& arm) {
  return compare_fields(run_scenario("cuda-graph-eager", eager_config(), "baseline").trace,
                        run_scenario("cuda-graph-eager", eager_config(), arm).trace, kFields);
}

std::string graph_localization(const std::string& arm) {
  if (!eager_differences(arm).empty())
    return "run eagerly it differs too; " + localize("cuda-graph-eager", eager_config(), arm);
  return "run eagerly it equals the baseline: replaying the graph makes the difference (no digest is taken inside "
         "a replayed iteration; no host code runs there)";
}

// What is wrong with `arm`'s graph run against the baseline (empty: nothing).
std::vector<std::string> graph_findings(const std::string& arm) {
  const RunConfig c = graph_config();
  const ScenarioResult& base = run_scenario("cuda-graph", c, "baseline");
  const ScenarioResult& r = run_scenario("cuda-graph", c, arm);
  const GraphReport& g = r.local.graph;
  std::vector<std::string> out;
  if (!g.error.empty()) out.push_back(fmt::format("rank {}: {}", world_rank(), g.error));
  const int64_t want = static_cast<int64_t>(replayable(c).size());
  if (g.captures != 1 || g.replays != want)
    out.push_back(fmt::format("rank {}: {} capture(s) and {} replay(s); the config has {} replayable iterations "
                              "(one capture, each replayed)", world_rank(), g.captures, g.replays, want));
  // A replayed iteration reads nothing, but at a log point its one batched read, after the replay.
  for (const IterationRecord& rec : r.trace.records) {
    if (rec.iteration < 3) continue;
    const bool log_point = rec.iteration % c.log_interval == 0;
    for (const auto& [site, n] : rec.reads_per_site)
      if (n > (log_point && site == site_name(Site::kBatchedLogRead) ? 1 : 0))
        out.push_back(fmt::format("iteration {} rank {}: {} read(s) at {}", rec.iteration, rec.rank, n, site));
  }
  const std::vector<Mismatch> differ = compare_fields(base.trace, r.trace, kFields);
  for (const Mismatch& m : differ) out.push_back(describe({m}, "baseline", arm + " + graph"));
  if (!differ.empty()) out.push_back(graph_localization(arm));
  return out;
}

class CudaGraph : public ArmTest {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaGraph);

TEST_P(CudaGraph, EveryIterationReplaysBitIdenticalToTheBaseline) {
  const std::vector<std::string> f = graph_findings(GetParam());
  EXPECT_TRUE(f.empty()) << GetParam() << " with --cuda-graph iteration: " << f.size() << " finding(s)"
                         << first_lines(f);
}

// Faults under the graph: the faulted iteration runs eagerly, the iterations after it replay with the device's
// verdict masking (abort) or not (skip) their steps; everything equals the arm run eagerly, which the
// nan_detection gate holds to the baseline.
TEST_P(CudaGraph, FaultOutcomesEqualTheEagerArm) {
  if (world_size() > 2)
    GTEST_SKIP() << "8 and 64 ranks run the clean graph scenario only (faults and alternation: the 1-2 rank fixtures, "
                    "which cover TP+SP and PP)";
  const int last = world_size() - 1;
  for (FaultOutcome outcome : {FaultOutcome::kAbort, FaultOutcome::kSkipStep}) {
    RunConfig c = graph_config();
    c.faults = inject(parse_fault_specs(fmt::format("iter=4,site=loss,rank={},kind=nan", last)));  // iteration 5: non-log
    c.rerun.on_fault = outcome;
    const std::string key = outcome == FaultOutcome::kAbort ? "cuda-graph-fault-abort" : "cuda-graph-fault-skip";
    const ScenarioResult& graphed = run_scenario(key, c, GetParam());
    RunConfig eager_c = c;
    eager_c.cuda_graph_iteration = false;
    const ScenarioResult& eager = run_scenario(key + "-eager", eager_c, GetParam());
    const GraphReport& g = graphed.local.graph;
    EXPECT_TRUE(g.error.empty()) << key << ": " << g.error;
    // Every replayable iteration but the faulted one (5, eager) replays — past the fault too, with the device's
    // verdict in the replayed work; the abort's run ends at the next log point (8), replayed, whose read finds it.
    // That read trails the replay of 9 (train.cpp log_read_trails), which runs with its step masked and is never
    // recorded.
    int64_t want = 0;
    for (int64_t it : replayable(c))
      if (it != 5 && (outcome != FaultOutcome::kAbort || it <= 9)) ++want;
    EXPECT_EQ(g.replays, want) << key << ": iterations replayed (the fault's neighbours included)";
    EXPECT_EQ(graphed.local.exit_code, eager.local.exit_code) << key;
    EXPECT_EQ(graphed.local.iterations_done, eager.local.iterations_done) << key;
    EXPECT_EQ(graphed.local.iterations_past_fault, eager.local.iterations_past_fault) << key;
    auto m = compare_fields(eager.trace, graphed.trace, kFields);
    EXPECT_TRUE(m.empty()) << key << describe(m, "eager", "graph");
  }
}

// `loopgate ab --cuda-graph iteration`: the arms alternate in one session; each zerosync phase holds new device
// state, so it captures afresh (the previous graph dropped) after one eager iteration of its own (without it, the
// op-stream check found the rerun bank growing inside the captured iteration: a graph would keep its freed
// storage) and replays within the phase; the alternating run stays bit-identical to the baseline alone.
TEST_P(CudaGraph, AlternatingWithTheBaselineRecapturesEveryPhase) {
  if (world_size() > 2)
    GTEST_SKIP() << "8 and 64 ranks run the clean graph scenario only (faults and alternation: the 1-2 rank fixtures, "
                    "which cover TP+SP and PP)";
  RunConfig c = on_gate_device(graph_config());
  c.train_iters = 24;  // phases of 4 (= the log interval): B A B A B A
  c.param_checksums = true;
  RunGroups g = pooled_run_groups(c);
  set_run_device(g.config.model.device);
  TrainSession session(g.config, find_arm("baseline"), g.groups, world_rank());
  for (int p = 0; p < 6; ++p) session.run(find_arm(p % 2 == 0 ? "baseline" : GetParam()), 4);
  const RunResult r = session.finish();
  set_run_device(c10::Device(c10::kCPU));
  const Trace alternating = gather_trace(r, MPI_COMM_WORLD);
  EXPECT_TRUE(r.graph.error.empty()) << r.graph.error;
  EXPECT_EQ(r.graph.captures, 3) << "one capture per phase of " << GetParam();
  EXPECT_EQ(r.graph.replays, 9) << "iterations 2-4 of each 4-iteration phase (the 1st warms the arm up; the 4th, "
                                   "a log point, replays and then reads)";
  auto m = compare_fields(run_scenario("cuda-graph-alternating-ref", c, "baseline").trace, alternating, kFields);
  EXPECT_TRUE(m.empty()) << describe(m, "baseline alone", "alternating");
}

INSTANTIATE_TEST_SUITE_P(Arms, CudaGraph, ::testing::ValuesIn(graph_arms()),
                         [](const auto& info) { return param_name(info.param); });

// Gate power: the LR passed as a host kernel argument. Eagerly it is the right value every iteration (the
// precondition: the same bits as the baseline without the graph), so only a replay shows it: on a GPU the
// captured LR is replayed forever (wrong numbers), on CPU the operator-stream check names the argument.
TEST(GatePower, CudaGraphRejectsAnLrPassedFromTheHost) {
  if (world_size() > 2)
    GTEST_SKIP() << "8 and 64 ranks run the clean graph scenario only (faults and alternation: the 1-2 rank fixtures, "
                    "which cover TP+SP and PP)";
  const std::vector<Mismatch> pre = eager_differences("defect-graph-host-lr");
  EXPECT_TRUE(pre.empty()) << "defect-graph-host-lr differs from the baseline even eagerly: not a graph-only defect"
                           << describe(pre, "baseline", "defect-graph-host-lr");
  const std::vector<std::string> f = graph_findings("defect-graph-host-lr");
  EXPECT_FALSE(f.empty()) << "the cuda_graph gate accepted an LR passed as a host kernel argument";
  // Where the replay gives other bits (a GPU), the finding says the eager arm is right and the replay is the cause.
  const bool bits_differ = std::any_of(f.begin(), f.end(), [](const std::string& x) { return x.find("+ graph") != std::string::npos; });
  if (bits_differ)
    EXPECT_TRUE(std::any_of(f.begin(), f.end(), [](const std::string& x) { return x.find("replaying the graph makes the difference") != std::string::npos; }))
        << first_lines(f);
  if (!f.empty() && world_rank() == 0) std::printf("rejected as expected:%s\n", first_lines(f, 2).c_str());
}

// The localization a failing graph run gets, on CPU too (where a replay is an eager run checked operator by
// operator, so its bits never part): an arm that differs eagerly is localized by digests (defect-numerics' LR, at
// the optimizer); one that is right eagerly is named as a replay difference (defect-graph-host-lr).
TEST(GatePower, CudaGraphLocalizesAnEagerDifferenceAndNamesAReplayOne) {
  if (world_size() > 2)
    GTEST_SKIP() << "8 and 64 ranks run the clean graph scenario only (faults and alternation: the 1-2 rank fixtures, "
                    "which cover TP+SP and PP)";
  const std::string eager = graph_localization("defect-numerics");
  EXPECT_NE(eager.find("run eagerly it differs too; first divergence: iteration"), std::string::npos) << eager;
  EXPECT_NE(eager.find(", optimizer, "), std::string::npos) << eager;
  const std::string replay = graph_localization("defect-graph-host-lr");
  EXPECT_NE(replay.find("replaying the graph makes the difference"), std::string::npos) << replay;
}

}  // namespace
}  // namespace loopgate
