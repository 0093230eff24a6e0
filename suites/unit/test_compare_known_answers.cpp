// Known answers for `loopgate compare` (tools/loopgate/compare_rows.h). For every field compare judges
// (compared_fields()) and every input kind that carries it — a Megatron log in its plain layout and in a launcher's
// layout (rank prefix and timestamp), golden-values JSON, a loopgate Trace, the shim's values file — files are
// written for two runs a side, and a difference is planted in that field alone, at an iteration inside the early
// window and at one outside it. The known answer: the field's rows fail, and each of their problems names the field,
// the iteration and the planted file's place (file:line for a log, "file iteration N" for JSON); every other row is
// as without the difference. An early-window field is reported by the early row inside the window and by the
// over-the-run row everywhere (the baseline's runs reproduce it). The same files with no difference pass.
// A field judged by compare with no known answer here fails KnownAnswers.EveryJudgedFieldHasAKnownAnswer.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 expects the early row to report outside its window too, so those
// cases fail.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "fixtures/golden_files.h"
#include "suites/unit/wrong.h"
#include "tools/analysis/run_values.h"
#include "tools/loopgate/compare_rows.h"

namespace loopgate {

void PrintTo(CompareResult r, std::ostream* os) { *os << compare_result_name(r); }  // gtest's failure lines

namespace {

namespace fs = std::filesystem;

constexpr int kIters = 8;
constexpr int64_t kEarly = 2;
constexpr int kInside = 2, kOutside = 6;  // iterations inside and outside 1..kEarly

enum class Kind { kLogPlain, kLogLauncher, kGolden, kTrace, kValues };
const std::vector<std::pair<Kind, std::string>> kKinds = {{Kind::kLogPlain, "Megatron log"},
                                                          {Kind::kLogLauncher, "Megatron log, launcher layout"},
                                                          {Kind::kGolden, "golden values"},
                                                          {Kind::kTrace, "loopgate Trace"},
                                                          {Kind::kValues, "shim values"}};

// One run's values at one iteration. Runs 0 and 1 of each side differ in grad norm and num zeros only (the
// within-side spread the spread rule needs), the same way on both sides.
struct Values {
  double lm_loss, params_norm, learning_rate, grad_norm, num_zeros, optimizer_lr;
  int64_t nan = 0, skipped = 0;
};

Values base_values(int run, int it) {
  return {5.0 + 0.0625 * it, 100.0 + 0.5 * it, 1e-4 * it, 1.0 + 0.125 * it + 0.03125 * run, 10.0 + 2.0 * run,
          1e-4 * (it + 1)};
}

// The difference planted in `field` (a compared_fields() name) at one run's values; false: no known answer.
bool plant(const std::string& field, Values& v) {
  if (field == "lm loss") v.lm_loss += 0.5;
  else if (field == "params norm") v.params_norm += 4.0;
  else if (field == "learning rate") v.learning_rate *= 2.0;
  else if (field == "optimizer learning rate") v.optimizer_lr *= 2.0;
  else if (field == "grad norm") v.grad_norm += 8.0;     // beyond 56 x the baseline's range of 0.03125
  else if (field == "num zeros") v.num_zeros += 512.0;   // beyond 56 x 2
  else if (field == "number of nan iterations") v.nan = 1;
  else if (field == "number of skipped iterations") v.skipped = 1;
  else return false;
  return true;
}

// Golden values carry no interval counters (Megatron's extractor records none); only the shim records the LR the
// optimizer's param groups got. The shim's NaN count is a skipped step's non-finite loss (as Megatron counts it),
// so a NaN iteration there is a NaN lm loss too: the skipped count stands for the counters.
bool carries(Kind k, const ComparedField& f) {
  if (f.name == "optimizer learning rate") return k == Kind::kValues;
  if (f.name == "number of nan iterations" && k == Kind::kValues) return false;
  return !(k == Kind::kGolden && f.count != nullptr);
}

std::string log_line(Kind k, int it, const Values& v) {
  std::string line = fmt::format(
      "iteration {:>8}/{:>8} | consumed samples: {:>12} | elapsed time per iteration (ms): 600.0 | learning rate: "
      "{:.6E} | global batch size: {:>5} | lm loss: {:.6E} | loss scale: 1.0 | grad norm: {:.5f} | num zeros: {:.1f} | "
      "params norm: {:.3f} | number of skipped iterations: {:>3} | number of nan iterations: {:>3} |",
      it, kIters, 8 * it, v.learning_rate, 8, v.lm_loss, v.grad_norm, v.num_zeros, v.params_norm, v.skipped, v.nan);
  if (k == Kind::kLogLauncher) line = fmt::format("[rank7]: [2026-12-01 10:00:{:02d}] ", it) + line;
  return line;
}

nlohmann::json golden_json(const std::vector<Values>& per_it) {
  nlohmann::json j;
  auto metric = [&](const char* name, auto get) {
    nlohmann::json m = {{"start_step", 1}, {"end_step", kIters}, {"step_interval", 1}};
    for (int it = 1; it <= kIters; ++it) m["values"][std::to_string(it)] = get(per_it[it - 1]);
    j[name] = m;
  };
  metric("lm loss", [](const Values& v) { return v.lm_loss; });
  metric("params-norm", [](const Values& v) { return v.params_norm; });
  metric("learning-rate", [](const Values& v) { return v.learning_rate; });
  metric("grad-norm", [](const Values& v) { return v.grad_norm; });
  metric("num-zeros", [](const Values& v) { return v.num_zeros; });
  return j;
}

Trace trace_of(const std::vector<Values>& per_it) {
  Trace t;
  t.arm = "baseline";
  t.fixture = "single";
  for (int it = 1; it <= kIters; ++it) {
    const Values& v = per_it[it - 1];
    IterationRecord r;
    r.iteration = it;
    r.lm_loss = v.lm_loss;
    r.params_norm = v.params_norm;
    r.learning_rate = v.learning_rate;
    r.grad_norm = v.grad_norm;
    r.num_zeros = v.num_zeros;
    r.nan = v.nan > 0;
    r.skipped = v.skipped > 0;
    r.timer_window_first = r.timer_window_last = it;  // a log point at every iteration
    t.records.push_back(r);
  }
  return t;
}

// The shim's values file (tools/cupti/loopgate_pyshim/loopgate_values.py): a log call per iteration, hex floats.
nlohmann::json values_json(const std::vector<Values>& per_it) {
  auto h = [](double v) { return fmt::format("{:a}", v); };
  nlohmann::json logs = nlohmann::json::array(), lrs = nlohmann::json::array();
  for (int it = 1; it <= kIters; ++it) {
    const Values& v = per_it[it - 1];
    logs.push_back({{"iteration", it}, {"step", it}, {"clock", 0.1 * it}, {"first", it == 1},
                    {"loss", {{"lm loss", h(v.lm_loss)}}}, {"learning_rate", h(v.learning_rate)},
                    {"loss_scale", h(1.0)}, {"skipped", v.skipped}, {"grad_norm", h(v.grad_norm)},
                    {"num_zeros", h(v.num_zeros)}, {"params_norm", h(v.params_norm)}});
    lrs.push_back({{"step", it}, {"lrs", {h(v.optimizer_lr)}}});
  }
  return {{"format", "loopgate-values/1"}, {"rank", 0}, {"logs", logs}, {"param_group_lrs", lrs},
          {"digests", nlohmann::json::array()}};
}

// Writes one run's file; returns its path.
std::string write_run(Kind k, const fs::path& dir, const std::string& name, const std::vector<Values>& per_it) {
  const fs::path p = dir / (name + (k == Kind::kGolden || k == Kind::kTrace || k == Kind::kValues ? ".json" : ".log"));
  std::ofstream out(p);
  if (k == Kind::kValues) {
    out << values_json(per_it).dump(1);
  } else if (k == Kind::kGolden) {
    out << golden_json(per_it).dump(1);
  } else if (k == Kind::kTrace) {
    out << trace_to_string(trace_of(per_it));
  } else {
    out << "a launcher's banner line\n";
    for (int it = 1; it <= kIters; ++it) out << log_line(k, it, per_it[it - 1]) << "\n";
  }
  return p.string();
}

struct Case {
  std::vector<CompareRow> rows;
  std::string planted_file;
};

// Two runs a side; with `field` set, its difference planted in B's first run at `iteration` (both B runs for a
// spread field: the between-side mean must move beyond the within-side spread).
Case run_case(Kind k, const std::string& field, int iteration) {
  static int n = 0;
  const fs::path dir = fs::temp_directory_path() / fmt::format("loopgate_known_answers_{}_{}", ::getpid(), n++);
  fs::create_directories(dir);
  Case c;
  std::vector<CompareRun> runs;
  for (char side : {'A', 'B'}) {
    for (int run = 0; run < 2; ++run) {
      std::vector<Values> per_it;
      for (int it = 1; it <= kIters; ++it) per_it.push_back(base_values(run, it));
      const bool spread = !field.empty() && (field == "grad norm" || field == "num zeros");
      const bool here = side == 'B' && !field.empty() && (run == 0 || spread);
      if (here) EXPECT_TRUE(plant(field, per_it[iteration - 1])) << "no known answer for field '" << field << "'";
      const std::string path = write_run(k, dir, fmt::format("{}{}", side, run), per_it);
      if (here && run == 0) c.planted_file = path;
      runs.push_back({side, read_any_run(path)});
    }
  }
  c.rows = judged_rows(runs, kEarly);
  remove_tree(dir.string());
  return c;
}

const char* const kOverTheRun = "loss, norms, zeros over run";

// The rows that must report a difference planted in `f` at iteration `it`.
std::set<std::string> rows_reporting(const ComparedField& f, int it) {
  switch (f.rule) {
    case FieldRule::kEarlyIdentity:
      if (it <= kEarly || wrong()) return {fmt::format("lm loss, params norm @ 1-{}", kEarly), kOverTheRun};
      return {kOverTheRun};
    case FieldRule::kIdentity: return {"learning rate"};
    case FieldRule::kZeroCount: return {"nan / skipped iterations"};
    case FieldRule::kSpread: return {kOverTheRun};
  }
  return {};
}

// Where a problem line must place the planted value: the log's line (the banner is line 1, iteration N line
// N + 1), or the JSON file and iteration.
std::string place(Kind k, const std::string& file, int it) {
  return k == Kind::kGolden || k == Kind::kTrace || k == Kind::kValues ? fmt::format("{} iteration {}", file, it)
                                                 : fmt::format("{}:{}", file, it + 1);
}

class KnownAnswers : public ::testing::TestWithParam<std::pair<Kind, std::string>> {};

TEST_P(KnownAnswers, NoDifferencePassesEveryRow) {
  const Case c = run_case(GetParam().first, "", 0);
  ASSERT_EQ(c.rows.size(), 4u);
  for (const CompareRow& r : c.rows) {
    EXPECT_EQ(r.result, CompareResult::kPass) << GetParam().second << ": " << r.check << ": " << r.detail;
    EXPECT_TRUE(r.problems.empty()) << r.check;
  }
}

TEST_P(KnownAnswers, EachFieldInsideAndOutsideTheEarlyWindow) {
  const Kind k = GetParam().first;
  const Case clean = run_case(k, "", 0);
  int cases = 0;
  for (const ComparedField& f : compared_fields()) {
    if (!carries(k, f)) continue;
    for (int it : {kInside, kOutside}) {
      ++cases;
      const std::string what = fmt::format("{}, {} at iteration {}", GetParam().second, f.name, it);
      const Case c = run_case(k, f.name, it);
      const std::set<std::string> reporting = rows_reporting(f, it);
      ASSERT_EQ(c.rows.size(), clean.rows.size()) << what;
      for (size_t i = 0; i < c.rows.size(); ++i) {
        const CompareRow& r = c.rows[i];
        if (reporting.count(r.check)) {
          EXPECT_EQ(r.result, CompareResult::kFail) << what << ": " << r.check << " " << r.detail;
          EXPECT_FALSE(r.problems.empty()) << what;
          for (const std::string& p : r.problems) {
            EXPECT_NE(p.find(f.name), std::string::npos) << what << ": the field is not named: " << p;
            EXPECT_NE(p.find(fmt::format("iteration {}", it)), std::string::npos) << what << ": " << p;
            EXPECT_NE(p.find(place(k, c.planted_file, it)), std::string::npos)
                << what << ": the planted place " << place(k, c.planted_file, it) << " is not named: " << p;
          }
        } else {  // nothing else may be reported
          EXPECT_EQ(r.result, clean.rows[i].result) << what << ": row " << r.check << ": " << r.detail;
          EXPECT_TRUE(r.problems.empty()) << what << ": row " << r.check << " reported " << r.problems.front();
        }
      }
    }
  }
  if (::testing::Test::HasFailure()) return;
  std::printf("%s: %d known answers (fields x inside / outside the early window 1-%lld)\n", GetParam().second.c_str(),
              cases, static_cast<long long>(kEarly));
}

INSTANTIATE_TEST_SUITE_P(Inputs, KnownAnswers, ::testing::ValuesIn(kKinds), [](const auto& info) {
  std::string n;
  for (char ch : info.param.second) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
});

// Over the whole run (two runs a side, grad norm at every iteration): a field the baseline's runs reproduce is
// held to identity in every run, so a candidate whose own runs part fails even where its mean is covered; a field
// the baseline does not reproduce is judged by the spread rule, at spread_factor(2) x the larger range, from the
// baseline's noise over the run (relative) or this iteration's range. A rule that read one side's range alone, or
// this iteration's range alone, fails here.
TEST(KnownAnswersSpread, ReproducedFieldsAreHeldToBitsNoisyOnesToTheSpreadRule) {
  auto over_run = [](double a0, double a1, double b0, double b1, int noisy_from = 1) {
    const double grad[2][2] = {{a0, a1}, {b0, b1}};
    std::vector<CompareRun> runs;
    for (int side = 0; side < 2; ++side)
      for (int run = 0; run < 2; ++run) {
        std::vector<Values> per_it;
        for (int it = 1; it <= kIters; ++it) {
          Values v = base_values(0, it);
          v.num_zeros = 10.0;
          v.grad_norm = it >= noisy_from || side == 1 ? grad[side][run] : grad[side][0];
          per_it.push_back(v);
        }
        const std::string name = fmt::format("{}{}", side == 0 ? 'A' : 'B', run);
        runs.push_back({side == 0 ? 'A' : 'B', trace_run(trace_of(per_it), name)});
      }
    return judged_rows(runs, kEarly)[3];
  };
  const CompareResult pass = wrong() ? CompareResult::kFail : CompareResult::kPass;
  const CompareResult fail = wrong() ? CompareResult::kPass : CompareResult::kFail;
  const double k = spread_factor(2);
  // The baseline reproduces grad norm: the candidate's runs part (means 2.0 and 2.25) -> fail.
  EXPECT_EQ(over_run(2.0, 2.0, 1.75, 2.75).result, fail) << "the candidate noisy where the baseline is exact";
  EXPECT_EQ(over_run(2.0, 2.0, 2.0, 2.0).result, pass) << "all identical";
  // The baseline noisy (range 0.5): a shift of k x 0.5 is covered, one beyond it fails, whichever side is noisier.
  EXPECT_EQ(over_run(1.75, 2.25, 2.0 + 0.4 * k, 2.0 + 0.4 * k).result, pass) << "covered by the baseline's range";
  EXPECT_EQ(over_run(1.75, 2.25, 2.0 + 0.6 * k, 2.0 + 0.6 * k).result, fail) << "beyond k x the baseline's range";
  EXPECT_EQ(over_run(1.75, 2.25, 1.0 + 0.6 * k, 3.0 + 0.6 * k).result, pass) << "covered by the candidate's range";
  // Discrete noise: the baseline's runs part at iterations 1-3 only; at the others each side lands on one value,
  // the two sides on different values. The baseline's noise over the run covers them.
  EXPECT_EQ(over_run(2.0, 2.0 + 1.0 / 64, 2.0 + 1.0 / 64, 2.0 + 1.0 / 64, 4).result, pass) << "discrete noise";
}

// The spread rule's factors (spread_factor) against the rate they promise: two sides of n runs of the same iid
// noise, |mean A - mean B| beyond factor x the larger range in at most 1e-4 of the trials (2e-4 with sampling
// error), where the seed's factor 1 is beyond in 22 % at n = 2 and 5 % at n = 3. Mutation check: wrong() takes
// factor 1 (the seed's rule) and must fail the rate.
TEST(KnownAnswersNoise, SpreadFactorsHoldTheFalsePositiveRateOfAnAAPair) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> z(0.0, 1.0);
  constexpr int kTrials = 200000;
  for (int n = 2; n <= 7; ++n) {
    const double factor = wrong() ? 1.0 : spread_factor(n);
    int beyond = 0, seed_beyond = 0;
    for (int t = 0; t < kTrials; ++t) {
      double sum[2] = {0, 0}, lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
      for (int side = 0; side < 2; ++side)
        for (int r = 0; r < n; ++r) {
          const double v = z(rng);
          sum[side] += v;
          lo[side] = std::min(lo[side], v);
          hi[side] = std::max(hi[side], v);
        }
      const double diff = std::fabs(sum[0] / n - sum[1] / n), range = std::max(hi[0] - lo[0], hi[1] - lo[1]);
      beyond += diff > factor * range;
      seed_beyond += diff > range;
    }
    const double rate = static_cast<double>(beyond) / kTrials;
    std::printf("  %d runs a side: factor %g, beyond %.5f (the seed's factor 1: %.4f)\n", n, factor, rate,
                static_cast<double>(seed_beyond) / kTrials);
    EXPECT_LE(rate, 2e-4) << n << " runs a side";
  }
}

// The matrix is generated from compared_fields(): a field compare judges with no planted difference here fails.
TEST(KnownAnswersTable, EveryJudgedFieldHasAKnownAnswer) {
  std::set<FieldRule> rules;
  for (const ComparedField& f : compared_fields()) {
    Values v = base_values(0, 1);
    EXPECT_TRUE(plant(f.name, v)) << "compare judges '" << f.name << "' but no known answer plants a difference in it";
    EXPECT_TRUE(std::any_of(kKinds.begin(), kKinds.end(), [&](const auto& k) { return carries(k.first, f); }))
        << f.name << ": no input kind carries it";
    EXPECT_TRUE((f.value != nullptr) != (f.count != nullptr)) << f.name << ": a value or a count, not both";
    rules.insert(f.rule);
  }
  EXPECT_EQ(rules.size(), 4u) << "every judged row has a field";
}

}  // namespace
}  // namespace loopgate
