// Gate: resume (restart replay). For each arm and save point: the run uninterrupted to N iterations; the same run
// saved at k and ended there (--save, --exit-interval k); a new run that loads that checkpoint and continues to N
// (--load). **Proves:** the resumed run's records k+1..N equal the uninterrupted run's bit for bit at every rank
// (lm loss, grad norm, num zeros, params norm, LR, loss scale, skipped, NaN, the parameter checksums before and
// after each step, the exit decision), its Megatron lines but for the timing field, its exit code, last iteration
// and the parameters it leaves; the saving run stopped at k with its records 1..k as the uninterrupted ones; and
// every timer interval is reported once across the restart (per timer, the uninterrupted count is the two runs'
// sum: none lost, none twice; the interval timer has two more, the saving run's last window and the save's pause
// in it; the save's own timer, one). Save points, on every
// fixture: the clean run (the other checks' uninterrupted run, log interval 1) saved halfway, by the arm and by the
// baseline for every arm; under --cuda-graph iteration (its CPU stand-in), where the new run captures again (not on
// dp64), at a log point and between log points. On single, at log interval 2: a log point; between log points
// (every family's log window rides the checkpoint, SavedWindow); right after a skipped NaN step, between log points
// (the skip pending in the window: on zerosync a verdict only the device banked); between log points in a window
// that holds an advanced step and then a skipped one (log interval 3); inside the LR warmup; inside WSD's
// anneal; inside the fp16 scaler's hysteresis and its growth interval. On tp2sp and pp2: between log points right
// after a NaN on the last rank skipped (every rank's window). A saver's checkpoint is made once and loaded by
// every arm. On single, for the arms that read nothing between log points: right after a NaN whose verdict is an
// abort, due at the next log point. **Not proven here:** the save on the duration exit; that the run is a new process
// (each run here is a new TrainSession in the same process: the CTest cli_run_resume runs two processes).
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "fixtures/compare.h"
#include "fixtures/faults/fault.h"
#include "fixtures/faults/fault_spec.h"
#include "fixtures/fixtures.h"
#include "fixtures/golden_files.h"
#include "fixtures/harness/args.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"

namespace loopgate {
namespace {

const std::vector<std::string> kResumedFields = {"lm_loss", "grad_norm", "num_zeros", "params_norm", "learning_rate",
                                                 "loss_scale", "skipped", "nan", "param_checksum_after"};

struct SavePoint {
  std::string name;
  int64_t k;  // the iteration saved at (the saving run ends there)
  std::function<RunConfig(RunConfig)> config;
  std::string run;  // the save point whose uninterrupted run (the same config) this one shares; empty: its own
  // Only for one arm of each family: the seed's intermediate commits (syncfree-1..4) hold the per-site family's window,
  // eager or deferred, and its scheduler and scaler, as the baseline and syncfree do; they resume at the log point and
  // after the skip (a check's cost, 2 cores).
  bool families_only = false;
  bool on_device_only = false;  // only for an arm that reads nothing between log points (its window holds the state)
};

RunConfig resume_base(RunConfig c) {
  c.train_iters = 12;
  c.log_interval = 2;
  c.schedule.lr_warmup_iters = std::min<int64_t>(c.schedule.lr_warmup_iters, c.train_iters - 1);
  c.param_checksums = true;
  return c;
}

// fp16 with dynamic loss scaling from `scale`, logged every iteration (Megatron turns the NaN check off there).
RunConfig fp16_resume_base(RunConfig c, double scale, int64_t growth_interval) {
  c = resume_base(c);
  c.log_interval = 1;
  c.dynamic_loss_scale = true;
  c.dynamic_scaler.initial_scale = scale;
  c.dynamic_scaler.min_scale = 1.0;
  c.dynamic_scaler.growth_interval = growth_interval;
  c.rerun.check_for_nan_in_loss_and_grad = false;
  return c;
}

const std::vector<SavePoint>& save_points() {
  static const std::vector<SavePoint> p = {
      {"log-point", 6, [](RunConfig c) { return resume_base(c); }},
      {"warmup", 4,
       [](RunConfig c) {
         c = resume_base(c);
         c.schedule.lr_warmup_iters = 8;
         return c;
       },
       "", true},
      {"wsd-anneal", 10,
       [](RunConfig c) {
         c = resume_base(c);
         c.schedule.lr_decay_style = LrDecayStyle::kWSD;
         c.schedule.lr_wsd_decay_iters = 6;  // the anneal is iterations 7..12
         return c;
       },
       "", true},
      // Between log points (the window 5..6 holds 5): every family's log window rides the checkpoint, and zerosync
      // reads its window's codes there.
      {"between-log-points", 5, [](RunConfig c) { return resume_base(c); }, "log-point", true},
      // Right after a skipped NaN step at 5, between log points: the skip (on zerosync a verdict only the device has
      // banked) must reach the resumed run's line at 6. (Until 2026-12-05 this point saved at 6, a log point.)
      {"after-skip", 5,
       [](RunConfig c) {
         c = resume_base(c);
         c.faults = inject(parse_fault_specs(fmt::format("iter=4,site=loss,rank={},kind=nan", world_size() - 1)));
         c.rerun.on_fault = FaultOutcome::kSkipStep;
         return c;
       }},
      // Between log points in a window that holds an advanced step and then a skipped one (log interval 3, the window
      // 7..9, a NaN skipped at 8): the save's read of the open window carries the loss sum beside the skip and the
      // NaN count, in every family (the per-site one's syncfree-1..4 included).
      {"advance-then-skip", 8,
       [](RunConfig c) {
         c = resume_base(c);
         c.log_interval = 3;
         c.faults = inject(parse_fault_specs(fmt::format("iter=7,site=loss,rank={},kind=nan", world_size() - 1)));
         c.rerun.on_fault = FaultOutcome::kSkipStep;
         return c;
       }},
      // Right after a NaN at 5 whose verdict is an abort, between log points: only an arm that reads nothing between
      // log points runs past it (the baseline exits at 5); the abort is due in the window, the save carries it, and
      // the loaded run must end at 6's log point with the same exit, every later step masked as in the run that saved.
      {"abort-due", 5,
       [](RunConfig c) {
         c = resume_base(c);
         c.faults = inject(parse_fault_specs(fmt::format("iter=4,site=loss,rank={},kind=nan", world_size() - 1)));
         c.rerun.on_fault = FaultOutcome::kAbort;
         return c;
       },
       "", false, true},
      // Hysteresis 2: the Inf at iteration 2 holds the scale and leaves the tracker at 1; the save at 2 must carry
      // it (the next Inf, at 4, backs off only if it did).
      {"fp16-hysteresis", 2,
       [](RunConfig c) {
         c = fp16_resume_base(c, 65536.0, 2);
         c.dynamic_scaler.hysteresis = 2;
         c.faults = inject(parse_fault_specs(fmt::format(
             "iter=1,site=grad,bucket=0,rank={0},kind=inf;iter=3,site=grad,bucket=0,rank={0},kind=inf",
             world_size() - 1)));
         return c;
       },
       "", true},
      // Growth interval 4 and no overflow: the save at 2 holds a growth tracker of 2, so the scale doubles after
      // iteration 4 only if the load restored it.
      {"fp16-growth", 2,
       [](RunConfig c) { return fp16_resume_base(c, 4096.0, 4); }, "", true},
  };
  return p;
}

// The records of `t` after iteration `k`, or up to it.
Trace records_after(const Trace& t, int64_t k, bool after) {
  Trace out = t;
  out.records.clear();
  for (const IterationRecord& r : t.records)
    if ((r.iteration > k) == after) out.records.push_back(r);
  return out;
}

// The Megatron lines of iterations after `k`, without their timing field.
std::vector<std::string> lines_after(const RunResult& r, int64_t k) {
  std::vector<std::string> out;
  for (const std::string& line : r.log_lines) {
    const size_t at = line.find(" iteration ");
    if (at != std::string::npos && std::atoll(line.c_str() + at + 11) > k) out.push_back(without_log_timing(line));
  }
  return out;
}

std::map<std::string, int64_t> intervals_per_timer(const RunResult& r) {
  std::map<std::string, int64_t> n;
  for (const TimerInterval& i : r.timers.intervals) ++n[i.name];
  return n;
}

std::vector<std::string> resume_differences(const ScenarioResult& full, const ScenarioResult& first,
                                            const ScenarioResult& resumed, int64_t k) {
  std::vector<std::string> d;
  const RunResult &a = full.local, &s = first.local, &b = resumed.local;
  if (!s.exited_on_interval || s.iterations_done != k)
    d.push_back(fmt::format("the saving run did not end at its save: exit on interval {}, last iteration {}",
                            s.exited_on_interval, s.iterations_done));
  if (a.exit_code != b.exit_code) d.push_back(fmt::format("exit code {} -> {}", a.exit_code, b.exit_code));
  if (a.iterations_done != b.iterations_done)
    d.push_back(fmt::format("last iteration {} -> {}", a.iterations_done, b.iterations_done));
  if (a.final_param_checksum != b.final_param_checksum)
    d.push_back(fmt::format("the parameters the run leaves: checksum {:016x} -> {:016x}", a.final_param_checksum,
                            b.final_param_checksum));
  for (const Mismatch& m : compare_fields(records_after(full.trace, k, true), resumed.trace, kResumedFields))
    d.push_back(m.describe("uninterrupted", "resumed"));
  for (const Mismatch& m : compare_fields(records_after(full.trace, k, false), first.trace, kResumedFields))
    d.push_back(m.describe("uninterrupted", "saving run"));
  for (const IterationRecord& r : resumed.trace.records) {
    if (r.iteration <= k) d.push_back(fmt::format("the resumed run recorded iteration {} (at or before the save)", r.iteration));
    const IterationRecord* f = full.trace.find(r.iteration, r.rank);
    if (f && (f->param_checksum_before != r.param_checksum_before || f->exit_decision != r.exit_decision))
      d.push_back(fmt::format("iteration {} rank {}: checksum before the step or exit decision differ", r.iteration,
                              r.rank));
  }
  const std::vector<std::string> la = lines_after(a, k), lb = lines_after(b, k);
  if (la.size() != lb.size()) d.push_back(fmt::format("{} log line(s) after {} -> {}", la.size(), k, lb.size()));
  for (size_t i = 0; i < la.size() && i < lb.size(); ++i)
    if (la[i] != lb[i]) d.push_back(fmt::format("log line:\n      uninterrupted: {}\n      resumed      : {}", la[i], lb[i]));
  // Per timer, the uninterrupted count is the two runs' sum, but for three: interval-time, which each run ends with
  // one more interval (from its last log point to its end), and which the save pauses (Megatron's
  // save_checkpoint_and_time: one more); save-checkpoint, one for the one save; and cuda-graph, which spans replays
  // only (the new run warms up eagerly before it captures again).
  std::map<std::string, int64_t> both = intervals_per_timer(s), expected = intervals_per_timer(a);
  for (const auto& [name, n] : intervals_per_timer(b)) both[name] += n;
  if (expected.count("interval-time")) expected["interval-time"] += 2;
  expected["save-checkpoint"] = 1;
  both.erase("cuda-graph");
  expected.erase("cuda-graph");
  if (both != expected) {
    std::string counts;
    for (const auto& [name, n] : expected)
      counts += fmt::format(" {}: {} -> {}", name, n, both.count(name) ? both[name] : 0);
    d.push_back("timer intervals reported across the restart, per timer (expected -> saving + resumed):" + counts);
  }
  return d;
}

// Saved by `saver` at iteration `k` of `config`, resumed by `arm`, against `full`: `arm` uninterrupted on `config`.
// The checkpoint of a saver at a save point is made once and loaded by every arm.
void check_resume(const std::string& key, const RunConfig& config, int64_t k, const std::string& saver,
                  const std::string& arm, const ScenarioResult& full) {
  const std::string dir = fmt::format("{}/{}-by-{}", launch_dir(), key, saver);
  RunConfig save = config;
  save.save_dir = dir;
  save.exit_interval = k;
  const ScenarioResult& first = run_scenario("resume:" + key + ":save", save, saver);
  RunConfig load = config;
  load.load_dir = dir;
  const ScenarioResult& resumed = run_scenario("resume:" + key + ":load-by-" + saver, load, arm);
  const std::vector<std::string> d = resume_differences(full, first, resumed, k);
  EXPECT_TRUE(d.empty()) << arm << " resumed at " << key << " (iteration " << k << ", saved by " << saver << "), rank "
                         << world_rank() << ": " << problem_list(d);
}

void check_resume(const std::string& key, const RunConfig& config, int64_t k, const std::string& saver,
                  const std::string& arm) {
  check_resume(key, config, k, saver, arm, run_scenario("resume:" + key, config, arm));
}

// The clean run's save point: halfway (a log point: the clean run logs every iteration), after iteration 1.
int64_t clean_save_point() { return std::max<int64_t>(2, clean_config().train_iters / 2); }

// The baseline resumes too (the gate's other arms take it as their reference); 8 ranks or more: baseline and
// zerosync unless arms are named.
std::vector<std::string> resume_arms() {
  if (!harness_arg("arms").empty()) return gate_arms();
  if (find_fixture(gate_fixture()).world >= 8) return {"baseline", "zerosync"};
  std::vector<std::string> arms = gate_arms();
  if (std::find(arms.begin(), arms.end(), "baseline") == arms.end()) arms.insert(arms.begin(), "baseline");
  return arms;
}

class Resume : public ArmTest {};

// The clean run itself (its uninterrupted run is the one the other checks made), saved halfway by the arm.
TEST_P(Resume, ContinuesTheCleanRunBitForBit) {
  const std::string& arm = GetParam();
  const int64_t k = clean_save_point();
  if (k >= clean_config().train_iters) GTEST_SKIP() << "the run is too short to save after iteration 1 and go on";
  check_resume("clean", clean_config(), k, arm, arm, clean_run(arm));
}

// The save points that hold deferred or scheduled state, at log interval 2. On one rank: the state they probe is
// the loop's, not the layout's, and the clean run above covers every fixture.
TEST_P(Resume, ContinuesBitForBitFromEverySavePoint) {
  const std::string& arm = GetParam();
  if (world_size() > 1) GTEST_SKIP() << "the save points run on single; the clean run's covers this fixture";
  for (const SavePoint& p : save_points()) {
    const RunConfig c = p.config(gate_config());
    if (p.k >= c.train_iters || (p.families_only && arm.rfind("syncfree-", 0) == 0)) continue;
    if (p.on_device_only && !find_arm(arm).on_device) continue;
    if (p.run.empty()) {
      check_resume(p.name, c, p.k, arm, arm);
    } else {
      check_resume(p.name, c, p.k, arm, arm, run_scenario("resume:" + p.run, c, arm));
    }
  }
}

// A save between log points on more than one rank, right after a NaN step on the last rank skipped: each rank's
// window is its own (on pp2 only the last stage holds the loss sum; the skip is a verdict every rank must carry).
// One arm of each log-window family (as between-log-points above); not at 8 ranks or more (2 cores).
TEST_P(Resume, ContinuesBetweenLogPointsOnEveryRank) {
  const std::string& arm = GetParam();
  if (world_size() == 1) GTEST_SKIP() << "single saves between log points at the save points above";
  if (world_size() >= 8) GTEST_SKIP() << "8 ranks or more on 2 cores: shown on tp2sp and pp2";
  if (arm.rfind("syncfree-", 0) == 0) GTEST_SKIP() << "syncfree-1..4 hold the per-site family's window";
  RunConfig c = resume_base(gate_config());
  c.train_iters = 6;
  c.schedule.lr_warmup_iters = std::min<int64_t>(c.schedule.lr_warmup_iters, c.train_iters - 1);
  c.faults = inject(parse_fault_specs(fmt::format("iter=2,site=loss,rank={},kind=nan", world_size() - 1)));
  c.rerun.on_fault = FaultOutcome::kSkipStep;
  check_resume("after-skip-ranks", c, 3, arm, arm);  // the window 3..4 holds the skip at 3
}

TEST_P(Resume, ContinuesFromTheBaselinesCheckpoint) {
  const std::string& arm = GetParam();
  if (arm == "baseline") GTEST_SKIP() << "the baseline resumes its own checkpoints in the test above";
  const int64_t k = clean_save_point();
  if (k >= clean_config().train_iters) GTEST_SKIP() << "the run is too short to save after iteration 1 and go on";
  check_resume("clean", clean_config(), k, "baseline", arm, clean_run(arm));
}

TEST_P(Resume, ContinuesUnderTheIterationGraph) {
  const std::string& arm = GetParam();
  if (!find_arm(arm).on_device) GTEST_SKIP() << "only an arm that reads nothing between log points replays";
  if (heavy_fixture()) GTEST_SKIP() << "64 ranks on 2 cores: the graph's resume is shown on every other fixture";
  // 12 iterations at log interval 2, saved at 6: the new run warms up eagerly, then captures again.
  RunConfig c = save_points().front().config(gate_config());
  c.cuda_graph_iteration = true;
  check_resume("log-point-graph", c, 6, arm, arm);
  // After a replayed iteration that is no log point; on single (the window is the loop's, not the layout's).
  if (world_size() == 1) check_resume("between-log-points-graph", c, 7, arm, arm);
}

INSTANTIATE_TEST_SUITE_P(Arms, Resume, ::testing::ValuesIn(resume_arms()),
                         [](const auto& info) { return param_name(info.param); });

// The launch's checkpoints (this gate's and run_features') are removed once every rank is past the last test.
class ResumeCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!launch_dir_made()) return;
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) remove_tree(launch_dir());
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new ResumeCleanup);

}  // namespace
}  // namespace loopgate
