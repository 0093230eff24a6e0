// Gate: run features x loop decisions. Every run feature of fixtures/run_features.h (each a `loopgate run` flag of
// the CLI's "Run features" group: --cuda-graph and its CPU stand-in, --digests, --check-collectives,
// --record-collectives, --async-emulation) is crossed with every decision the loop takes (a skipped step, an abort
// at a fault, the exit-duration vote, the exit interval, a save, a run resumed from the baseline's checkpoint), for
// each arm. **Proves:** the arm with the feature on takes each decision exactly as the same arm without it: the
// same exit code, the same last iteration, the same exit on duration, the same parameters at the run's end (a step
// taken past the last record shows only there), the same bits of every record field at every iteration and rank
// (lm loss, grad norm, num zeros, params norm, LR, loss scale, skipped, NaN, parameter checksum, exit decision),
// and the same Megatron log lines but for the timing field. --record-collectives is on in every gate scenario (the
// collectives check reads the record), so its cell holds that run to the one with the record off; held to itself,
// it passed whatever the record did. The other gates hold each arm's decisions to the
// baseline's; this one holds the features to the arm. A replayed arm under --cuda-graph lets a log point's read
// trail the next replay: this is where a change that does so while a decision rides the read shows. Not proven
// here: --stress and CUPTI; --async-emulation on a GPU (left out there); that a featured save writes the plain
// save's bits (the resume gate holds saves to the run); on 8 and 64 ranks, arms other than zerosync; on dp64,
// features other than the replay.
#include <gtest/gtest.h>
#include <fmt/format.h>


#include "fixtures/compare.h"
#include "fixtures/fixtures.h"
#include "fixtures/harness/args.h"
#include "fixtures/run_features.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"

namespace loopgate {
namespace {

const std::vector<std::string> kDecidedFields = {"lm_loss",    "grad_norm", "num_zeros", "params_norm",         "learning_rate",
                                          "loss_scale", "skipped",   "nan",       "param_checksum_after"};

// 8 ranks or more: the arm that both defers and replays (zerosync) only, unless arms are named (the matrix cost
// 49 s for three arms on pp2tp2dp2 on 2 cores).
std::vector<std::string> feature_arms() {
  if (find_fixture(gate_fixture()).world < 8 || !harness_arg("arms").empty()) return gate_arms();
  return {"zerosync"};
}

// What `featured` decided otherwise than `plain` (the same arm, the same decision, the feature off).
std::vector<std::string> decision_differences(const ScenarioResult& plain, const ScenarioResult& featured) {
  std::vector<std::string> d;
  const RunResult& a = plain.local;
  const RunResult& b = featured.local;
  if (a.exit_code != b.exit_code) d.push_back(fmt::format("exit code {} -> {}", a.exit_code, b.exit_code));
  if (a.iterations_done != b.iterations_done)
    d.push_back(fmt::format("last iteration {} -> {}", a.iterations_done, b.iterations_done));
  if (a.exited_on_duration != b.exited_on_duration)
    d.push_back(fmt::format("exit on duration {} -> {}", a.exited_on_duration, b.exited_on_duration));
  if (a.final_param_checksum != b.final_param_checksum)
    d.push_back(fmt::format("the parameters the run leaves: checksum {:016x} -> {:016x} (a step taken past the last "
                            "record)", a.final_param_checksum, b.final_param_checksum));
  for (const Mismatch& m : compare_fields(plain.trace, featured.trace, kDecidedFields))
    d.push_back(m.describe("off", "on"));
  for (const IterationRecord& r : plain.trace.records)
    if (const IterationRecord* f = featured.trace.find(r.iteration, r.rank); f && f->exit_decision != r.exit_decision)
      d.push_back(fmt::format("iteration {} rank {}: exit decision {} -> {}", r.iteration, r.rank, r.exit_decision,
                              f->exit_decision));
  if (a.log_lines.size() != b.log_lines.size())
    d.push_back(fmt::format("{} log line(s) -> {}", a.log_lines.size(), b.log_lines.size()));
  for (size_t i = 0; i < a.log_lines.size() && i < b.log_lines.size(); ++i)
    if (without_log_timing(a.log_lines[i]) != without_log_timing(b.log_lines[i]))
      d.push_back(fmt::format("log line {}:\n      off: {}\n      on : {}", i + 1, without_log_timing(a.log_lines[i]),
                              without_log_timing(b.log_lines[i])));
  return d;
}

// The features this device and fixture run: on a GPU not --async-emulation (its copies are really asynchronous;
// the races gate runs under --stress there); on 64 ranks on 2 cores (258 s for the whole matrix of three arms)
// the replay alone, the feature that changes the loop's path (the instruments run there in the other gates).
std::vector<RunFeature> features_here() {
  std::vector<RunFeature> out;
  for (const RunFeature& f : run_features()) {
    if (harness_arg("device") == "cuda" && f.flag == "--async-emulation") continue;
    if (heavy_fixture() && f.flag != "--cuda-graph") continue;
    out.push_back(f);
  }
  return out;
}

// The checkpoint the baseline saves at the decision's iteration of `c`, without a feature (once per launch).
std::string saved_by_baseline(const LoopDecision& decision, const RunConfig& c) {
  RunConfig save = c;
  save.save_dir = fmt::format("{}/features-{}", launch_dir(), decision.name);
  save.exit_interval = decision.resume_after;
  run_scenario("features:" + decision.name + ":save", save, "baseline");
  return save.save_dir;
}

class RunFeatures : public ArmTest {};

TEST_P(RunFeatures, NoFeatureChangesADecisionTheLoopTakes) {
  const std::string& arm = GetParam();
  const std::vector<RunFeature> features = features_here();
  size_t cells = 0;
  for (const LoopDecision& decision : loop_decisions()) {
    RunConfig plain_config = decision.apply(gate_config(), world_size(), launch_dir());
    if (decision.resume_after > 0) plain_config.load_dir = saved_by_baseline(decision, plain_config);
    const ScenarioResult& plain = run_scenario("features:" + decision.name, plain_config, arm);
    for (const RunFeature& feature : features) {
      RunConfig c = plain_config;
      feature.turn_on(c);
      // A feature every scenario has on (the record): the plain run is the featured one, held to a run without it.
      const std::vector<std::string> d =
          feature.on_in_every_scenario
              ? decision_differences(run_scenario("features:" + decision.name + ":without" + feature.flag,
                                                  plain_config, arm, Record::kNothing),
                                     plain)
              : decision_differences(plain, run_scenario("features:" + decision.name + ":" + feature.flag, c, arm));
      EXPECT_TRUE(d.empty()) << arm << " with " << feature.flag << " at " << decision.name << ", rank " << world_rank()
                             << ": " << problem_list(d);
      ++cells;
    }
  }
  if (world_rank() == 0)
    std::printf("run features: %s: %zu features x %zu decisions = %zu cells\n", arm.c_str(), features.size(),
                loop_decisions().size(), cells);
}

INSTANTIATE_TEST_SUITE_P(Arms, RunFeatures, ::testing::ValuesIn(feature_arms()),
                         [](const auto& info) { return param_name(info.param); });

}  // namespace
}  // namespace loopgate
