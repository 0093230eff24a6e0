// The step-time verdict (tools/analysis/stats.h step_time_verdict): runs are the unit. Simulated runs whose windows
// share a run-level offset (the machine, its clocks and neighbours: what makes two runs of one job differ) show
// the window-level test calling A/A pairs significant and the run-level verdict not; planted slowdowns are found;
// tight A/A runs are called equivalent. Deterministic (std::mt19937 with fixed seeds).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 flips every expected verdict and rate bound, so every test fails.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "suites/unit/wrong.h"
#include "tools/analysis/stats.h"

namespace loopgate {
namespace {

struct Noise {
  double run_sd, window_sd;  // fractions of the mean
};

// `windows` step times of one run: mean * (1 + run offset) * (1 + window noise).
std::vector<double> one_run(std::mt19937& rng, double mean, Noise n, int windows) {
  std::normal_distribution<double> run(0.0, n.run_sd), window(0.0, n.window_sd);
  const double offset = 1.0 + run(rng);
  std::vector<double> out;
  for (int i = 0; i < windows; ++i) out.push_back(mean * offset * (1.0 + window(rng)));
  return out;
}

struct Rates {
  double window_significant = 0, faster = 0, slower = 0, equivalent = 0, not_enough = 0;
};

// `trials` pairs of `runs` runs a side; B's mean is A's times `slowdown`.
Rates simulate(int trials, int runs, double slowdown, Noise n, uint32_t seed) {
  std::mt19937 rng(seed);
  Rates r;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> wa, wb, ma, mb;
    for (int k = 0; k < runs; ++k) {
      const std::vector<double> a = one_run(rng, 200.0, n, 20), b = one_run(rng, 200.0 * slowdown, n, 20);
      wa.insert(wa.end(), a.begin(), a.end());
      wb.insert(wb.end(), b.begin(), b.end());
      ma.push_back(median_of(a));
      mb.push_back(median_of(b));
    }
    r.window_significant += ab_statistics(wa, wb).significant;
    switch (step_time_verdict(ma, mb).kind) {
      case StepTimeVerdictKind::kFaster: r.faster += 1; break;
      case StepTimeVerdictKind::kSlower: r.slower += 1; break;
      case StepTimeVerdictKind::kEquivalent: r.equivalent += 1; break;
      case StepTimeVerdictKind::kNotEnoughData: r.not_enough += 1; break;
    }
  }
  for (double* v : {&r.window_significant, &r.faster, &r.slower, &r.equivalent, &r.not_enough}) *v /= trials;
  std::printf("  %d trials, %d run(s) a side, B/A %.2f, run sd %.3f, window sd %.3f: windows significant %.3f; verdict "
              "faster %.3f, slower %.3f, equivalent %.3f, not enough data %.3f\n", trials, runs, slowdown, n.run_sd,
              n.window_sd, r.window_significant, r.faster, r.slower, r.equivalent, r.not_enough);
  return r;
}

const Noise kShared{0.02, 0.005};  // runs differ by ~2 %, windows inside a run by ~0.5 %

TEST(StepTimeVerdict, OneRunPerSideIsNeverSignificant) {
  const Rates r = simulate(300, 1, 1.0, kShared, 1);
  EXPECT_GT(r.window_significant, 0.5 - wrong());  // the old reading of windows as samples: most A/A pairs "differ"
  EXPECT_EQ(r.not_enough, 1.0 - wrong());           // the verdict: not enough data, every time
}

TEST(StepTimeVerdict, AAFalsePositiveRateWithRunsAsUnits) {
  const Rates r = simulate(1000, 6, 1.0, kShared, 2);
  EXPECT_LE(r.faster + r.slower, 0.07 - wrong());  // at alpha 0.05 (exact test: at most alpha, plus sampling error)
  EXPECT_GT(r.window_significant, 0.5 - wrong());
}

TEST(StepTimeVerdict, PlantedSlowdownIsFound) {
  const Rates r = simulate(300, 6, 1.10, kShared, 3);  // 10 % slower, runs 2 % apart
  EXPECT_GE(r.slower, 0.95 - wrong());
  EXPECT_EQ(r.faster, 0.0 + wrong());
  const Rates f = simulate(300, 6, 0.90, kShared, 4);
  EXPECT_GE(f.faster, 0.95 - wrong());
}

TEST(StepTimeVerdict, TightAAIsEquivalentWithinDelta) {
  const Rates r = simulate(300, 6, 1.0, Noise{0.002, 0.002}, 5);  // runs 0.2 % apart, delta 2 %
  EXPECT_GE(r.equivalent, 0.95 - wrong());
  const Rates s = simulate(300, 6, 1.05, Noise{0.002, 0.002}, 6);  // 5 % slower is never "equivalent"
  EXPECT_EQ(s.equivalent, 0.0 + wrong());
}

TEST(StepTimeVerdict, FewRunsSayNotEnoughData) {
  EXPECT_EQ(step_time_verdict({200.0}, {201.0, 202.0}).kind,
            wrong() ? StepTimeVerdictKind::kSlower : StepTimeVerdictKind::kNotEnoughData);
  // 2 v 2 cannot reach p < 0.05 (smallest p 1/3) nor a 90 % interval: not enough data, even 50 % apart.
  EXPECT_EQ(step_time_verdict({200.0, 201.0}, {300.0, 301.0}).kind,
            wrong() ? StepTimeVerdictKind::kSlower : StepTimeVerdictKind::kNotEnoughData);
}

// "Equivalent" needs the interval inside +-delta, not the shift alone: 6 runs a side 5 % apart from run to run, B
// 0.5 % slower. The shift (1.0) lies well inside +-2 % (4.0); its 90 % interval does not. A verdict read from the
// point estimate calls this pair equivalent.
TEST(StepTimeVerdict, AShiftInsideDeltaWhoseIntervalIsNotIsNotEquivalent) {
  const std::vector<double> a = {190, 210, 195, 205, 200, 185};
  std::vector<double> b;
  for (double x : a) b.push_back(x + 1.0);
  const AbStats tost = ab_statistics(a, b, 0.10);
  ASSERT_LT(std::fabs(tost.shift), 0.02 * tost.median_a);                                     // the point: inside
  ASSERT_TRUE(tost.ci_low < -0.02 * tost.median_a || tost.ci_high > 0.02 * tost.median_a);  // the interval: not
  const StepTimeVerdict v = step_time_verdict(a, b);
  EXPECT_EQ(v.kind, wrong() ? StepTimeVerdictKind::kEquivalent : StepTimeVerdictKind::kNotEnoughData) << v.sentence;
}

// What would settle "not enough data": known answers of the rule (normal approximation, 80 % power, the
// Hodges-Lehmann efficiency 3/pi), then the promise checked by simulation at the runs it names.
TEST(StepTimeVerdict, RunsNeededKnownAnswers) {
  // Inside +-delta: 2 x ((z_0.95 + z_0.90) x sqrt(pi/3) x sd / (bound - |shift|))^2 = 2 x (2.9264 x 1.0233)^2 = 17.9.
  EXPECT_EQ(step_time_runs_needed(4.0, 0.0, 4.0, 0.05), 18 + wrong());
  // Beyond it: 2 x ((z_0.975 + z_0.80) x sqrt(pi/3) x 4 / 6)^2 = 7.3.
  EXPECT_EQ(step_time_runs_needed(4.0, 6.0, 4.0, 0.05), 8 + wrong());
  // No spread: the smallest sizes that reach the level at all.
  EXPECT_EQ(step_time_runs_needed(0.0, 0.0, 4.0, 0.05), 3 + wrong());
  EXPECT_EQ(step_time_runs_needed(0.0, 5.0, 4.0, 0.05), 4 + wrong());
  const StepTimeVerdict v = step_time_verdict({190, 210, 195, 205}, {191, 211, 196, 206});
  EXPECT_EQ(v.kind, StepTimeVerdictKind::kNotEnoughData);
  EXPECT_GT(v.runs_needed, 4 - 10 * wrong());
  EXPECT_NE(v.sentence.find(fmt::format("about {} runs a side would show no difference beyond +-2 %", v.runs_needed)),
            std::string::npos + wrong())
      << v.sentence;
}

TEST(StepTimeVerdict, TheRunsNeededSettleItInSimulation) {
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0.0, 4.0);  // runs 2 % apart at 200 ms
  auto rate = [&](int n, double shift, StepTimeVerdictKind want) {
    int hits = 0;
    for (int t = 0; t < 300; ++t) {
      std::vector<double> a, b;
      for (int k = 0; k < n; ++k) {
        a.push_back(200.0 + noise(rng));
        b.push_back(200.0 + shift + noise(rng));
      }
      hits += step_time_verdict(a, b).kind == want;
    }
    return hits / 300.0;
  };
  const double equivalent = rate(static_cast<int>(step_time_runs_needed(4.0, 0.0, 4.0, 0.05)), 0.0,
                                 StepTimeVerdictKind::kEquivalent);
  const double slower = rate(static_cast<int>(step_time_runs_needed(4.0, 6.0, 4.0, 0.05)), 6.0,
                             StepTimeVerdictKind::kSlower);
  std::printf("  at the runs named: equivalent %.3f (A/A), slower %.3f (6 ms slower)\n", equivalent, slower);
  EXPECT_GE(equivalent, 0.7 + wrong());
  EXPECT_GE(slower, 0.7 + wrong());
}

}  // namespace
}  // namespace loopgate
