// Gate: fp16. Megatron's fp16 path with a DynamicGradScaler, and a grad overflow (Inf) on ONE rank — the last world
// rank: last pipeline stage, TP rank tp-1, DP rank dp-1 — at chosen iterations. Megatron turns the rerun machine's
// NaN/Inf checks off for fp16 with dynamic scaling ("NaNs in grads / loss are signal to the loss scaler":
// arguments.py L1195-L1203, docs/design.md), so the scenario does too and the Inf reaches
// optimizer.step, whose found_inf is MAX-reduced over the grad-stats group (TP x PP; DP replicas share the Inf
// through the grads' DP all-reduce). Checked on every rank, for the baseline and every arm, against closed-form
// expectations (a host model of DynamicGradScaler.update below; the schedule stepped once per clean iteration):
// the step is skipped at every overflow iteration (parameter checksum unchanged) and taken at every clean one;
// update_successful is agreed (the log line counts the skipped iteration, grad norm omitted); the loss scale holds
// through hysteresis, backs off, backs off again, grows after the window; the LR holds on skipped steps and
// advances after; no fault verdict (the rerun machine is not what skips). Every arm: every logged field
// bit-identical to the baseline's. And the scaled run equals, bit for bit, an unscaled run whose rerun machine skips
// the same steps (every scale is a power of two; this is what catches a loss scale not applied before backward).
// dp64 (64 ranks on 2 cores): 3 iterations (hold, backoff, clean), no reference run.
// The scenario keeps the fixture's layout and data with one layer per pipeline stage (the skip path is under test).
// The Inf goes into a grad bucket whose first element no later collective spreads (not an SP grad all-reduced over
// TP, not the tied embedding all-reduced over PP): only optimizer.step's found_inf reduction tells the other ranks.
// Power: found_inf reduced over too few ranks (defect-found-inf-local, defect-found-inf-tp-group) is rejected where
// the grad-stats group has ranks it leaves out. Not proven here: fp16 model params (CPU fixtures are fp32; the
// scaler's arithmetic is the same), an overflow in the forward pass or the loss, the constant scaler.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "fixtures/compare.h"
#include "fixtures/faults/fault.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"
#include "trainer/common/error.h"
#include "trainer/model/init.h"
#include "trainer/optim/grad_buffer.h"

namespace loopgate {
namespace {

// ---- the scenario ----

// Megatron's factors (growth 2, backoff 0.5, exact in binary); a 2-step window and hysteresis 2 so that a few
// iterations show hold, backoff, a second backoff and growth. Every scale is a power of two: exact in float.
DynamicGradScalerConfig scaler_config() {
  DynamicGradScalerConfig s;
  s.initial_scale = 65536.0;  // --initial-loss-scale 2**16
  s.min_scale = 1.0;          // --min-loss-scale
  s.growth_interval = 2;      // --loss-scale-window
  s.hysteresis = 2;           // --hysteresis
  return s;
}

struct Fp16Case {
  int64_t iters;
  std::vector<int64_t> overflow;    // 1-based iterations with an Inf grad on one rank
  std::vector<double> scale_after;  // hand-derived: loss scale / initial scale after each iteration
};

// Clean (growth 1), Inf (hysteresis 2 -> 1: hold; growth 0), clean (growth 1; hysteresis NOT restored), Inf (-> 0:
// back off), Inf (-> -1: back off again), clean, clean (two in a row: grow, hysteresis restored). No overflow at
// iteration 1, so the rerun machine (which never validates the job's first iteration) can skip the same steps in
// the unscaled reference run. dp64 (one scenario, no reference run): Inf (hold), Inf (back off), clean.
Fp16Case fp16_case() {
  if (heavy_fixture()) return {3, {1, 2}, {1.0, 0.5, 0.5}};
  return {7, {2, 4, 5}, {1.0, 1.0, 1.0, 0.5, 0.25, 0.25, 0.5}};
}

bool overflows_at(const Fp16Case& fc, int64_t it) {
  return std::find(fc.overflow.begin(), fc.overflow.end(), it) != fc.overflow.end();
}

int overflow_rank() { return world_size() - 1; }

// The first grad bucket of `rank` whose element 0 (where the injector writes) no collective after the DP
// all-reduce spreads: not an SP-replicated grad (all-reduced over TP) and not the tied word embedding (over PP).
// -1 when every bucket of this size starts with such a grad.
int local_bucket(const RunConfig& c, int rank, int64_t bucket_size) {
  const Layout layout = Layout::build(world_size(), c.layout);
  const std::vector<StageParamShape> shapes = stage_param_shapes(c.model, layout, rank);
  const std::vector<ParamSpec> specs = gpt_param_specs(c.model);
  const BucketLayout b = layout_grad_buckets(stage_param_numels(c.model, layout, rank), bucket_size);
  for (int k = 0; k < b.num_buckets(); ++k) {
    const StageParamShape& first = shapes.at(static_cast<size_t>(b.members.at(k).front()));
    const bool over_tp = specs.at(first.spec).sp_grad_reduce && layout.sequence_parallel() && layout.tp() > 1;
    const bool over_pp = first.spec == 0 && c.model.tie_embeddings && layout.pp() > 1;
    if (!over_tp && !over_pp) return k;
  }
  return -1;
}

// The fixture's bucket size, halved until a bucket of the overflow rank starts with a grad only it holds (a
// small model can fit in one bucket that starts with an SP grad); and that bucket. The built-in fixtures keep theirs.
std::pair<int64_t, int> overflow_bucket(const RunConfig& c) {
  int64_t size = c.bucket_size > 0 ? c.bucket_size : kDefaultBucketSize;
  int bucket = local_bucket(c, overflow_rank(), size);
  while (bucket < 0 && size > 1) bucket = local_bucket(c, overflow_rank(), size /= 2);
  LG_CHECK(bucket >= 0, "fp16 gate: rank {} has no grad bucket that starts with a grad only it holds", overflow_rank());
  return {size, bucket};
}

RunConfig fp16_config() {
  const Fp16Case fc = fp16_case();
  RunConfig c = gate_config();
  // One layer per stage (as the LR gate does): the skip path is under test, not the model; layout, data and
  // everything else stay the fixture's. A third of the time per iteration.
  c.model.layers = std::max(1, c.layout.pp);
  c.train_iters = fc.iters;
  c.log_interval = 1;
  c.schedule.lr_warmup_iters = std::min<int64_t>(c.schedule.lr_warmup_iters, fc.iters - 1);  // warmup < train
  // A held LR of 0 (warmup from 0) would leave the parameters unmoved on a clean step too: start warmup above 0.
  c.schedule.lr_warmup_init = c.schedule.lr / 4;
  c.dynamic_loss_scale = true;
  c.dynamic_scaler = scaler_config();
  c.rerun.check_for_nan_in_loss_and_grad = false;  // Megatron: forced off for fp16 with dynamic loss scaling
  const auto [bucket_size, bucket] = overflow_bucket(c);
  c.bucket_size = bucket_size;
  std::vector<FaultSpec> faults;
  for (int64_t it : fc.overflow)
    faults.push_back(parse_fault_spec(fmt::format("iter={},site=grad,bucket={},rank={},kind=inf", it - 1, bucket,
                                                  overflow_rank())));
  c.faults = inject(std::move(faults));
  return c;
}

const ScenarioResult& fp16_run(const std::string& arm) { return run_scenario("fp16:overflow", fp16_config(), arm); }

// The same run without a scaler (bf16-style, loss scale 1.0): the same Inf, caught by the rerun machine's grad
// check (Megatron's default, on when there is no dynamic scaler) and skipped with on_fault = skip.
const ScenarioResult& unscaled_reference_run() {
  RunConfig c = fp16_config();
  c.dynamic_loss_scale = false;
  c.rerun.check_for_nan_in_loss_and_grad = true;
  c.rerun.on_fault = FaultOutcome::kSkipStep;
  return run_scenario("fp16:unscaled-reference", c, "baseline");
}

// ---- closed-form expectations ----

// Megatron DynamicGradScaler.update (grad_scaler.py L131-L153) on host numbers: the scale after each iteration.
std::vector<double> expected_scales(const DynamicGradScalerConfig& c, const Fp16Case& fc) {
  std::vector<double> out;
  double scale = c.initial_scale;
  int64_t growth_tracker = 0, hysteresis_tracker = c.hysteresis;
  for (int64_t it = 1; it <= fc.iters; ++it) {
    if (overflows_at(fc, it)) {
      growth_tracker = 0;
      hysteresis_tracker -= 1;
      if (hysteresis_tracker <= 0) scale = std::max(scale * c.backoff_factor, c.min_scale);
    } else {
      growth_tracker += 1;
      if (growth_tracker == c.growth_interval) {
        growth_tracker = 0;
        hysteresis_tracker = c.hysteresis;
        scale = scale * c.growth_factor;
      }
    }
    out.push_back(scale);
  }
  return out;
}

// ---- the checks: every problem, one line each, naming arm, iteration, rank ----

std::vector<std::string> fp16_problems(const std::string& arm) {
  std::vector<std::string> p;
  const Fp16Case fc = fp16_case();
  const RunConfig c = fp16_config();
  const ScenarioResult& r = fp16_run(arm);
  const std::vector<double> scales = expected_scales(c.dynamic_scaler, fc);
  auto bad = [&](int64_t it, int rank, const std::string& what) {
    p.push_back(fmt::format("{}: iteration {} rank {}: {}", arm, it, rank, what));
  };
  for (int rank = 0; rank < world_size(); ++rank) {
    int64_t advances = 0;
    for (int64_t it = 1; it <= fc.iters; ++it) {
      const bool overflow = overflows_at(fc, it);
      advances += overflow ? 0 : 1;
      const IterationRecord* rec = r.trace.find(it, rank);
      if (!rec) {
        bad(it, rank, "no record");
        continue;
      }
      if (rec->skipped != overflow) bad(it, rank, fmt::format("skipped {} expected {}", rec->skipped, overflow));
      if (!rec->fault_verdicts.empty()) bad(it, rank, "a fault verdict: the rerun machine acted, not the scaler");
      const bool moved = rec->param_checksum_after != rec->param_checksum_before;
      if (overflow && moved)
        bad(it, rank, fmt::format("params moved at an overflow iteration: checksum before {:#x}, after {:#x}",
                                  rec->param_checksum_before, rec->param_checksum_after));
      if (!overflow && !moved) bad(it, rank, "params did not move at a clean iteration");
      const double scale = static_cast<float>(scales[static_cast<size_t>(it - 1)]);
      if (!same_bits(rec->loss_scale, scale))
        bad(it, rank, fmt::format("loss_scale {} expected {}", hex(rec->loss_scale), hex(scale)));
      const double lr = expected_lr(c, advances);
      if (!same_bits(rec->learning_rate, lr))
        bad(it, rank, fmt::format("learning_rate {} expected {} ({} advance(s))", hex(rec->learning_rate), hex(lr),
                                  advances));
    }
  }
  if (r.local.exit_code != 0 || r.local.iterations_done != fc.iters)
    bad(r.local.iterations_done, world_rank(), fmt::format("exit code {} after {} iteration(s), expected 0 after {}",
                                                           r.local.exit_code, r.local.iterations_done, fc.iters));
  // update_successful as the log line shows it (print_rank_last): counted skipped, grad norm omitted (None). The
  // count covers the iterations since the last reset, and Megatron HEAD's first-iteration line does not reset
  // (docs/design.md): at log interval 1 the line of iteration 2 counts iterations 1 and 2.
  if (world_rank() == world_size() - 1) {
    const std::vector<std::string>& lines = r.local.log_lines;
    int64_t skipped_since_reset = 0;
    for (int64_t it = 1; it <= fc.iters; ++it) {
      const bool overflow = overflows_at(fc, it);
      skipped_since_reset += overflow ? 1 : 0;
      const int64_t counted = skipped_since_reset;
      if (it != 1) skipped_since_reset = 0;
      if (lines.size() < static_cast<size_t>(it)) {
        bad(it, world_rank(), "no log line");
        continue;
      }
      const std::string& line = lines[static_cast<size_t>(it - 1)];
      for (const std::string& want :
           {fmt::format("number of skipped iterations: {:3d} |", counted),
            std::string("number of nan iterations:   0 |"),
            fmt::format("loss scale: {:.1f} |", scales[static_cast<size_t>(it - 1)])})
        if (line.find(want) == std::string::npos) bad(it, world_rank(), "log line lacks '" + want + "': " + line);
      if ((line.find("grad norm:") != std::string::npos) == overflow)
        bad(it, world_rank(), std::string("log line ") + (overflow ? "shows" : "lacks") + " a grad norm: " + line);
    }
  }
  return p;
}

// ---- tests ----

// The host model against the sequence derived by hand in fp16_case(): the expectations are Megatron's rules, and
// the scenario really shows hold, backoff and (on the small fixtures) growth.
TEST(Fp16, ScalerRulesGiveTheHandDerivedScaleSequence) {
  const Fp16Case fc = fp16_case();
  const DynamicGradScalerConfig s = scaler_config();
  const std::vector<double> got = expected_scales(s, fc);
  ASSERT_EQ(got.size(), fc.scale_after.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], fc.scale_after[i] * s.initial_scale) << "iteration " << i + 1;
}

TEST(Fp16, BaselineSkipsEveryOverflowOnEveryRankWithMegatronsScaleAndLr) {
  const std::vector<std::string> p = fp16_problems("baseline");
  EXPECT_TRUE(p.empty()) << problem_list(p);
  if (p.empty() && world_rank() == 0) {
    const RunConfig c = fp16_config();
    const Layout layout = Layout::build(world_size(), c.layout);
    const Coord at = layout.coord(overflow_rank());
    std::printf("fp16: Inf in grad bucket %d (buckets of %lld) of rank %d (pp %d, tp %d, dp %d) at iterations %s: "
                "skipped on all %d rank(s), loss scale %s\n",
                overflow_bucket(c).second, static_cast<long long>(c.bucket_size), overflow_rank(), at.pp, at.tp, at.dp,
                fmt::format("{}", fmt::join(fp16_case().overflow, ", ")).c_str(), world_size(),
                fmt::format("{}", fmt::join(expected_scales(c.dynamic_scaler, fp16_case()), " ")).c_str());
  }
}

// With power-of-two scales the scaled loss, every grad and the unscaled grads are exact, so the run must equal the
// unscaled one that skips the same steps by other means: the skipped step left Adam's state untouched, the loss
// was scaled before backward and unscaled after. grad norm and num zeros of skipped steps are compared as absent
// in both (Megatron: None); the loss scale is the only field that differs.
TEST(Fp16, ScaledRunEqualsUnscaledRunSkippingTheSameSteps) {
  if (heavy_fixture()) GTEST_SKIP() << "dp64 runs one fp16 scenario (64 ranks on 2 cores); the other fixtures run this";
  const Trace& scaled = fp16_run("baseline").trace;
  const Trace& ref = unscaled_reference_run().trace;
  std::vector<std::string> p;
  for (const IterationRecord& a : scaled.records) {
    const IterationRecord* b = ref.find(a.iteration, a.rank);
    if (!b) {
      p.push_back(fmt::format("iteration {} rank {}: no record in the unscaled run", a.iteration, a.rank));
      continue;
    }
    std::vector<std::string> fields = record_fields();
    fields.insert(fields.end(), {"nan", "consumed_samples"});
    for (const std::string& f : fields) {
      if (f == "loss_scale") continue;
      const bool absent_when_skipped = f == "grad_norm" || f == "num_zeros";
      if (absent_when_skipped && a.skipped && b->skipped) continue;
      const double x = field_value(a, f), y = field_value(*b, f);
      const bool same = f == "param_checksum_after" ? a.param_checksum_after == b->param_checksum_after : same_bits(x, y);
      if (!same)
        p.push_back(fmt::format("iteration {} rank {} {}: scaled {} unscaled {}", a.iteration, a.rank, f, hex(x), hex(y)));
    }
    if (b->loss_scale != 1.0) p.push_back(fmt::format("iteration {} rank {}: unscaled run's loss scale {}", a.iteration,
                                                      a.rank, hex(b->loss_scale)));
  }
  EXPECT_TRUE(p.empty()) << problem_list(p);
  EXPECT_EQ(scaled.records.size(), ref.records.size());
}

class Fp16 : public ArmTest {};

TEST_P(Fp16, OverflowSkippedOnEveryRankEveryFieldAsBaseline) {
  const std::vector<std::string> p = fp16_problems(GetParam());
  EXPECT_TRUE(p.empty()) << problem_list(p);
  const auto m = compare_fields(fp16_run("baseline").trace, fp16_run(GetParam()).trace, record_fields());
  EXPECT_TRUE(m.empty()) << describe(m, "baseline", GetParam());
}

INSTANTIATE_TEST_SUITE_P(Arms, Fp16, ::testing::ValuesIn(gate_arms()),
                         [](const auto& info) { return param_name(info.param); });

// Gate power: found_inf reduced over too few ranks. Where the grad-stats group (TP x PP) has ranks the defect
// leaves out, some rank steps at an overflow iteration: rejected for that reason (params moved).
TEST(GatePower, Fp16RejectsFoundInfReducedOverTooFewRanks) {
  const Layout layout = Layout::build(world_size(), gate_config().layout);
  const std::string defect = layout.pp() > 1   ? "defect-found-inf-tp-group"
                             : layout.tp() > 1 ? "defect-found-inf-local"
                                               : "";
  if (defect.empty())
    GTEST_SKIP() << "the grad-stats group (TP x PP) is one rank here: no narrower found_inf reduction exists (the "
                    "grads' DP all-reduce already gives every DP replica the Inf)";
  const std::vector<std::string> p = fp16_problems(defect);
  size_t moved = 0;
  for (const std::string& s : p) moved += s.find("params moved at an overflow") != std::string::npos;
  EXPECT_GT(moved, 0u) << "the fp16 gate did not see a rank step at an overflow iteration under " << defect << ": "
                       << problem_list(p);
  const auto m = compare_fields(fp16_run("baseline").trace, fp16_run(defect).trace, record_fields());
  EXPECT_FALSE(m.empty()) << defect << " logged every field as the baseline did";
  if (moved > 0 && world_rank() == 0) std::printf("rejected as expected (%s): %s\n", defect.c_str(), problem_list(p, 3).c_str());
}

}  // namespace
}  // namespace loopgate
