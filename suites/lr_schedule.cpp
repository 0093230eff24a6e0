// Gate: lr_schedule. The learning rate the loop logs is bit-identical between the baseline and each candidate
// arm over 200 iterations, and equal to golden/lr_sequences.json for every decay style (constant, linear,
// cosine, inverse-square-root, WSD with linear / cosine / exponential / minus_sqrt anneals), the warmup edge
// cases (0, 1, a fraction giving a fractional warmup in samples) and skipped steps (a NaN loss with
// on_fault = skip at iterations 4 and 100: the LR must not advance on a skipped step, Megatron 5.3) and three cases
// with a non-zero --lr-warmup-init whose last bit tells plausible wrong formulas apart (suites/unit/
// test_lr_golden_cases.cpp).
// The LR scenarios run a TINY model (layers = pp, hidden 16, heads 2, seq 8, vocab 32) with the fixture's
// layout and batch: the LR path (scheduler steps by M * mbs * dp samples on success only, the LR's trip to
// the log) is what is under test, not the model. The logged LR is the float32 that reduce_max_stat makes of
// the scheduler's double (Megatron does the same), so the loop is compared with float(golden); the golden
// doubles themselves are checked bit for bit against the scheduler port by `loopgate golden --check`.
// The per-style cases run on the single fixture (the same scheduler and loop code everywhere; the layout only
// sets the global batch, and golden is computed per global batch). Every fixture runs the cross-arm sequence
// with skipped steps: 200 iterations (dp64, 64 ranks on 2 cores: 8 iterations against the golden prefix, the
// skip at 4 included; pp2tp2dp2: 104, both skips), for gate_arms() (scenarios.h: on 8 and 64 ranks the seed's intermediate commits run
// equivalence and sync_budget only). What ran is printed in the test output.
// Power: defect-lr-on-skip (the scheduler advances on a skipped step) is rejected.
// Also here: GoldenValues — the fixture's baseline against golden/<fixture>/golden_values_cpu.json (exact bits
// when the recorded environment matches this one, Megatron's tolerances otherwise; golden/README.md). Where bits
// are demanded and differ, the run is redone with digests and the first record that differs from golden's digests
// (<fixture>/digests_cpu.json) is named.
// Not proven here: LR equality under a checkpoint resume (no checkpointing in the trainer).
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include <algorithm>

#include "fixtures/compare.h"
#include "fixtures/golden.h"
#include "fixtures/harness/args.h"
#include "fixtures/localize.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"

namespace loopgate {
namespace {

// dp64: 8 iterations against the golden prefix (the skip at 4 included); pp2tp2dp2 (8 ranks): 104 (both skips, 4
// and 100); the 1-2 rank fixtures: all 200.
int64_t lr_iters() {
  if (heavy_fixture()) return 8;
  return world_size() > 2 ? std::min<int64_t>(104, gate_iters(kLrIterations)) : gate_iters(kLrIterations);
}
std::string golden_dir() { return harness_arg("golden_dir", default_golden_dir()); }
const LrCase& skip_case() { return find_lr_case("cosine-skipped-steps"); }
bool every_style_here() { return gate_fixture() == "single"; }

const nlohmann::json& lr_golden() {
  static const nlohmann::json j = read_json_file(golden_dir() + "/lr_sequences.json");
  return j;
}

const ScenarioResult& lr_run(const LrCase& c, const std::string& arm) {
  return run_scenario("lr:" + c.name, lr_case_config(gate_fixture(), c, lr_iters()), arm);
}

// Every (iteration, rank) whose logged LR differs from float(golden), or whose skipped flag is not the case's.
std::vector<std::string> lr_vs_golden(const Trace& t, const LrCase& c) {
  std::vector<double> golden = golden_lr_sequence(lr_golden(), c.name, gate_config().data.global_batch);
  std::vector<std::string> out;
  for (int64_t it = 1; it <= lr_iters(); ++it) {
    bool want_skip = std::find(c.skipped_iterations.begin(), c.skipped_iterations.end(), it) !=
                     c.skipped_iterations.end();
    double want = static_cast<float>(golden.at(static_cast<size_t>(it - 1)));
    for (int rank = 0; rank < world_size(); ++rank) {
      const IterationRecord* r = t.find(it, rank);
      if (!r) {
        out.push_back(fmt::format("iteration {} rank {}: no record", it, rank));
        continue;
      }
      if (!same_bits(r->learning_rate, want))
        out.push_back(fmt::format("iteration {} rank {} learning_rate: golden {} (float of {}) actual {}", it, rank,
                                  hex(want), hex(golden[it - 1]), hex(r->learning_rate)));
      if (r->skipped != want_skip)
        out.push_back(fmt::format("iteration {} rank {} skipped: expected {} actual {}", it, rank, want_skip,
                                  r->skipped));
    }
  }
  return out;
}

// ---- every style, warmup edge case and skip pattern: the baseline loop against the golden sequence ----
// One test per case, so that the gate's shards spread the 21 runs (one test of all of them held a GPU shard for
// ~45 s). On the other fixtures only the skipped-steps case is instantiated.
std::vector<std::string> lr_cases_here() {
  std::vector<std::string> names;
  for (const LrCase& c : lr_cases())
    if (every_style_here() || c.name == skip_case().name) names.push_back(c.name);
  return names;
}

class LrScheduleCase : public ::testing::TestWithParam<std::string> {};

TEST_P(LrScheduleCase, BaselineLoopEqualsGolden) {
  const LrCase& c = find_lr_case(GetParam());
  auto m = lr_vs_golden(lr_run(c, "baseline").trace, c);
  EXPECT_TRUE(m.empty()) << c.name << ": " << m.size() << " differences over " << lr_iters() << " iterations"
                         << first_lines(m);
  if (m.empty() && world_rank() == 0)
    std::printf("%s: %lld iterations equal to golden (global batch %d)%s\n", c.name.c_str(),
                static_cast<long long>(lr_iters()), gate_config().data.global_batch,
                every_style_here() ? "" : "; every style runs on the single fixture");
}

// No instantiation name: the suite stays "LrScheduleCase" (the lr_schedule check's prefix); the case name is not an
// arm (the gate reads value parameters as arms only under Arms/).
INSTANTIATE_TEST_SUITE_P(, LrScheduleCase, ::testing::ValuesIn(lr_cases_here()),
                         [](const auto& info) { return param_name(info.param); });

// ---- each candidate arm: bit-identical to the baseline, and to golden, with skipped steps ----
class LrSchedule : public ArmTest {};

TEST_P(LrSchedule, SequenceBitIdenticalToBaselineAndGoldenWithSkippedSteps) {
  if (heavy_fixture() && world_rank() == 0)
    std::printf("dp64: LR scenario shortened to %lld iterations, compared with the golden prefix\n",
                static_cast<long long>(lr_iters()));
  const Trace& base = lr_run(skip_case(), "baseline").trace;
  const Trace& cand = lr_run(skip_case(), GetParam()).trace;
  auto m = compare_fields(base, cand, {"learning_rate", "skipped"});
  EXPECT_TRUE(m.empty()) << describe(m, "baseline", GetParam());
  auto g = lr_vs_golden(cand, skip_case());
  EXPECT_TRUE(g.empty()) << GetParam() << " vs golden: " << g.size() << " differences" << first_lines(g);
}

INSTANTIATE_TEST_SUITE_P(Arms, LrSchedule, ::testing::ValuesIn(gate_arms()),
                         [](const auto& info) { return param_name(info.param); });

// Gate power: an arm whose scheduler advances on a skipped step must be rejected (by both comparisons).
TEST(GatePower, LrScheduleRejectsLrAdvancingOnSkippedStep) {
  const Trace& base = lr_run(skip_case(), "baseline").trace;
  const Trace& bad = lr_run(skip_case(), "defect-lr-on-skip").trace;
  auto m = compare_fields(base, bad, {"learning_rate", "skipped"});
  auto g = lr_vs_golden(bad, skip_case());
  EXPECT_FALSE(m.empty()) << "the LR gate accepted an arm whose LR advances on a skipped step (vs baseline)";
  EXPECT_FALSE(g.empty()) << "the LR gate accepted an arm whose LR advances on a skipped step (vs golden)";
  if (!m.empty() && world_rank() == 0) std::printf("rejected as expected: %s\n", describe(m, "baseline", "defect-lr-on-skip", 2).c_str());
}

// Gate power: zerosync's LR comes from a table indexed by the device's step count; indexed one step ahead, the
// logged LR sequence (and the steps) leave the baseline's.
TEST(GatePower, LrScheduleRejectsAZerosyncTableOneStepOff) {
  const Trace& base = lr_run(skip_case(), "baseline").trace;
  const Trace& bad = lr_run(skip_case(), "defect-zerosync-lr-off-by-one").trace;
  auto m = compare_fields(base, bad, {"learning_rate"});
  EXPECT_FALSE(m.empty()) << "the LR gate accepted a zerosync LR table indexed one step off";
  if (!m.empty() && world_rank() == 0)
    std::printf("rejected as expected: %s\n", describe(m, "baseline", "defect-zerosync-lr-off-by-one", 2).c_str());
}

// ---- golden values: the fixture's baseline (the clean run when its iteration count is golden's) ----
const ScenarioResult& golden_baseline(const std::string& arm) {
  RunConfig c = golden_run_config(gate_fixture());
  if (gate_iters(c.train_iters) == c.train_iters) return clean_run(arm);  // the clean run has golden's count
  return run_scenario("golden", c, arm);
}

bool on_gpu() { return harness_arg("device", "cpu") == "cuda"; }

// golden/<F>/golden_values_<device>.json and environment_<device>.json.
std::string golden_file(const std::string& what) {
  return loopgate::golden_file(golden_dir(), gate_fixture(), what, on_gpu() ? "cuda" : "cpu");
}

GoldenCheck golden_check(const std::string& arm, std::string* digest = nullptr) {
  const ScenarioResult& r = golden_baseline(arm);
  const nlohmann::json actual = golden_values_from_trace(r.trace);
  if (digest) *digest = json_digest(actual);
  return check_golden_values(read_json_file(golden_file("golden_values")), read_json_file(golden_file("environment")),
                             actual, r.trace.environment);
}

// On a GPU the golden values are bits of one environment (GPU model, driver, CUDA, NCCL and its algorithm,
// cuBLAS's workspace: cuda_environment()). None recorded for this device, or recorded in another environment: the
// comparison is refused with the reason (a skip, never a pass), as bf16 tolerances would be neither exact nor
// Megatron's. "" when it may run.
std::string gpu_golden_refusal(const GoldenCheck* gc) {
  if (!on_gpu()) return "";
  if (!std::filesystem::exists(golden_file("golden_values")))
    return "refused: no GPU golden values for " + gate_fixture() + " (" + golden_file("golden_values") +
           "); GPU golden values are recorded per environment";
  if (gc && !gc->environment_matches) {
    std::string d;
    for (const auto& x : gc->env_differences) d += (d.empty() ? "" : "; ") + x;
    return "refused: bit-exact comparison across GPU environments (" + d + ")";
  }
  return "";
}

// Where `arm`'s golden run first parts from golden's bits: the run again with digests, against the digests
// `golden --update` kept (golden_files.h: the first iterations, DP replica 0). Only where bits are demanded.
std::string localize_against_golden(const std::string& arm) {
  const std::string path = golden_file("digests");
  if (!std::filesystem::exists(path))
    return "first divergence: no golden digests here (" + path + "; `loopgate golden --update` records them)";
  RunConfig c = golden_run_config(gate_fixture());
  c.digests = true;
  const Trace now = golden_digest_records(run_scenario("golden:digests", c, arm).trace);
  const std::optional<Divergence> d = first_divergence(trace_from_golden_digests(read_json_file(path)), now);
  return d ? "first divergence from golden's digests: " + d->describe()
           : fmt::format("first divergence: none within golden's digests (iterations 1-{}, DP replica 0)",
                         kGoldenDigestIterations);
}

TEST(GoldenValues, BaselineMatchesGoldenValues) {
  if (std::string why = gpu_golden_refusal(nullptr); !why.empty()) GTEST_SKIP() << why;
  std::string digest;
  GoldenCheck gc = golden_check("baseline", &digest);
  if (std::string why = gpu_golden_refusal(&gc); !why.empty()) GTEST_SKIP() << why;
  std::string notes;
  for (const auto& n : gc.notes) notes += "\n  " + n;
  for (const auto& d : gc.env_differences) notes += "\n  environment " + d;
  const std::string where = !gc.failures.empty() && gc.environment_matches ? "\n" + localize_against_golden("baseline") : "";
  EXPECT_TRUE(gc.failures.empty()) << "baseline vs golden/" << gate_fixture() << " (environment "
                                   << (gc.environment_matches ? "matches: exact bits" : "differs: tolerances") << ")"
                                   << first_lines(gc.failures) << notes << where;
  if (world_rank() == 0) std::printf("golden values %s: environment %s%s\n", gate_fixture().c_str(),
                                     gc.environment_matches ? "matches (exact bits)" : "differs (tolerances)", notes.c_str());
  // One word for the values this run computed, whatever the verdict: ci/repeat.sh compares it across runs.
  if (world_rank() == 0) std::printf("golden values %s: %s, digest %s\n", gate_fixture().c_str(),
                                     gc.failures.empty() ? "pass" : "FAIL", digest.c_str());
}

TEST(GatePower, GoldenValuesRejectPerturbedNumerics) {
  if (heavy_fixture()) GTEST_SKIP() << "dp64: the same comparison code is shown to reject on the smaller fixtures";
  if (std::string why = gpu_golden_refusal(nullptr); !why.empty()) GTEST_SKIP() << why;
  GoldenCheck gc = golden_check("defect-numerics");
  if (!gc.environment_matches) GTEST_SKIP() << "environment differs from golden's: tolerances cannot see a 2^-10 LR change";
  EXPECT_FALSE(gc.failures.empty()) << "golden values accepted an arm whose LR is off by 2^-10";
  // And localized against golden's digests: the LR reaches the bits first at the optimizer's output. (The CPU
  // tier records them; a GPU tier without <F>/digests_cuda.json says so instead.)
  const std::string where = localize_against_golden("defect-numerics");
  if (!on_gpu() || std::filesystem::exists(golden_file("digests"))) {
    EXPECT_NE(where.find("first divergence from golden's digests: iteration 2, rank 0"), std::string::npos) << where;
    EXPECT_NE(where.find(", optimizer, "), std::string::npos) << where;
  }
  if (!gc.failures.empty() && world_rank() == 0)
    std::printf("rejected as expected:%s\n%s\n", first_lines(gc.failures, 2).c_str(), where.c_str());
}

}  // namespace
}  // namespace loopgate
