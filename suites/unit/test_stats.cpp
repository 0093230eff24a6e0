// Unit tests for the A/B statistics (tools/analysis/stats.h): exact Mann–Whitney p-values against the known values of
// docs/design.md "Statistics", tie cases computed by hand and cross-checked by enumerating every
// split of the pooled sample, SciPy's normal branch against a hand computation, the Hodges–Lehmann shift and
// Moses interval against hand-counted differences, the k-th difference against a full sort, and the guards.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "suites/unit/wrong.h"
#include "tools/analysis/stats.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

double shifted(double x) { return wrong() ? x * 1.01 + 0.01 : x; }

std::vector<double> range(double from, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

// The two-sided p by brute force: every C(n, n_a) split of the pooled sample, mid-ranks as doubles.
double enumerated_p(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  const int n = static_cast<int>(pooled.size()), na = static_cast<int>(a.size());
  std::vector<double> rank(n);
  for (int i = 0; i < n; ++i) {
    int less = 0, equal = 0;
    for (int j = 0; j < n; ++j) {
      less += pooled[j] < pooled[i];
      equal += pooled[j] == pooled[i];
    }
    rank[i] = less + (equal + 1) / 2.0;
  }
  double w = 0;
  for (int i = 0; i < na; ++i) w += rank[i];
  const double mean = na * (n + 1) / 2.0, d = std::fabs(w - mean);
  long hits = 0, total = 0;
  for (unsigned mask = 0; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) != na) continue;
    double s = 0;
    for (int i = 0; i < n; ++i)
      if (mask & (1u << i)) s += rank[i];
    ++total;
    hits += std::fabs(s - mean) >= d - 1e-9;
  }
  return static_cast<double>(hits) / static_cast<double>(total);
}

TEST(Stats, ExactKnownValuesWithoutTies) {
  // docs/design.md: full separation 6 v 6 = 2/924; U = 31 of 36; 3 v 3; 5 v 7 = 2/792.
  AbStats s66 = ab_statistics(range(7, 6), range(1, 6));
  EXPECT_EQ(s66.method, "exact");
  EXPECT_DOUBLE_EQ(s66.u_a, shifted(36));
  EXPECT_NEAR(s66.p_value, shifted(2.0 / 924.0), 1e-15);
  EXPECT_NEAR(s66.p_value, shifted(0.002165), 5e-7);

  AbStats s31 = ab_statistics({2, 8, 9, 10, 11, 12}, {1, 3, 4, 5, 6, 7});
  EXPECT_DOUBLE_EQ(s31.u_a, shifted(31));
  EXPECT_NEAR(s31.p_value, shifted(0.041126), 5e-7);
  EXPECT_TRUE(s31.significant != static_cast<bool>(wrong()));

  AbStats s33 = ab_statistics({4, 5, 6}, {1, 2, 3});
  EXPECT_NEAR(s33.p_value, shifted(0.1), 1e-15);
  EXPECT_NEAR(s33.min_p, shifted(0.1), 1e-15);
  EXPECT_EQ(s33.significant, static_cast<bool>(wrong()));

  AbStats s57 = ab_statistics(range(1, 5), range(10, 7));
  EXPECT_DOUBLE_EQ(s57.u_a, shifted(0));
  EXPECT_NEAR(s57.p_value, shifted(0.002525), 5e-7);
  EXPECT_NEAR(s57.p_value, shifted(2.0 / 792.0), 1e-15);
  EXPECT_EQ(s57.n_a + s57.n_b, 12 + wrong());
}

TEST(Stats, ExactWithTiesByHand) {
  // a = {1,2,2}, b = {2,3,4}: mid-ranks 1, 3, 3 | 3, 5, 6, W = 7, E W = 10.5. Of the 20 splits of
  // {1,3,3,3,5,6}, |W - 10.5| >= 3.5 for the three {1,3,3} (W = 7) and the three {3,5,6} (W = 14): p = 6/20.
  AbStats s = ab_statistics({1, 2, 2}, {2, 3, 4});
  EXPECT_EQ(s.method, wrong() ? "exact" : "exact with ties");
  EXPECT_NEAR(s.p_value, shifted(0.3), 1e-15);
  EXPECT_DOUBLE_EQ(s.u_a, shifted(1.0));  // 2 > nothing, 2 = 2 twice (0.5 each): U_A = 1
  // All values equal: every split has the same rank sum, p = 1.
  AbStats same = ab_statistics({5, 5, 5}, {5, 5});
  EXPECT_NEAR(same.p_value, shifted(1.0), 1e-15);
  EXPECT_DOUBLE_EQ(same.u_a, shifted(3.0));
}

TEST(Stats, ExactWithTiesMatchesEnumeratingEverySplit) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> value(1, 4);  // few distinct values: many ties
  for (int trial = 0; trial < 40; ++trial) {
    const int na = 2 + trial % 6, nb = 2 + (trial / 6) % 7;  // n <= 14: at most 16384 masks
    std::vector<double> a(na), b(nb);
    for (double& x : a) x = value(gen);
    for (double& x : b) x = value(gen) + (trial % 3 == 0 ? 0.5 : 0.0);
    AbStats s = ab_statistics(a, b);
    EXPECT_NEAR(s.p_value, shifted(enumerated_p(a, b)), 1e-12) << "trial " << trial << " " << na << " v " << nb;
  }
}

TEST(Stats, NormalBranchMatchesTheHandComputedScipyValue) {
  // 26 v 26 (n = 52 > 50): a = 0..25, b = 10..35. U_A = 120 + 16 * 0.5 = 128, U = max(128, 548) = 548;
  // tie term 16 * (2^3 - 2) = 96; s = sqrt(676/12 * (53 - 96/(52*51))) = 54.622591031370824;
  // z = (548 - 338 - 0.5) / s = 3.8354094165851644; p = 2 * sf(z) = 0.00012535530168737564 (python math.erfc).
  AbStats s = ab_statistics(range(0, 26), range(10, 26));
  EXPECT_EQ(s.method, wrong() ? "exact" : "normal");
  EXPECT_DOUBLE_EQ(s.u_a, shifted(128));
  EXPECT_NEAR(s.p_value, shifted(0.00012535530168737564), 1e-15);
  EXPECT_NEAR(normal_quantile(0.975), shifted(1.959963984540054), 1e-12);
}

TEST(Stats, HodgesLehmannShiftAndMosesInterval) {
  // a = 1..6, b = 7..12: the 36 differences b_j - a_i = 6 + (j - i) take 1..11 with multiplicities
  // 1,2,3,4,5,6,5,4,3,2,1. Median (18th, 19th) = 6. 6 v 6: P(U <= 5) = 19/924 <= 0.025 < P(U <= 6), so
  // k = 6: cumulative counts 1,3,6,10,15,21,26,30,33,... so d_(6) = 3, d_(31) = 9; coverage 1 - 38/924.
  AbStats s = ab_statistics(range(1, 6), range(7, 6));
  EXPECT_DOUBLE_EQ(s.shift, shifted(6));
  EXPECT_EQ(s.ci_k, 6 + wrong());
  EXPECT_DOUBLE_EQ(s.ci_low, shifted(3));
  EXPECT_DOUBLE_EQ(s.ci_high, shifted(9));
  EXPECT_NEAR(s.ci_coverage, shifted(1.0 - 38.0 / 924.0), 1e-15);
  EXPECT_TRUE(s.ci_reaches_level != static_cast<bool>(wrong()));
  EXPECT_DOUBLE_EQ(s.median_a, shifted(3.5));
  EXPECT_DOUBLE_EQ(s.ratio, shifted(9.5 / 3.5));
  // 3 v 3: P(U <= 0) = 1/20 > 0.025: no 95 % interval exists; the widest (k = 1) covers 1 - 2/20 = 90 %.
  AbStats t = ab_statistics({1, 2, 3}, {4, 5, 6});
  EXPECT_FALSE(t.ci_reaches_level != static_cast<bool>(wrong()));
  EXPECT_NEAR(t.ci_coverage, shifted(0.9), 1e-15);
  EXPECT_DOUBLE_EQ(t.ci_low, shifted(1));
  EXPECT_DOUBLE_EQ(t.ci_high, shifted(5));
}

TEST(Stats, KthPairwiseDifferenceMatchesAFullSort) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> u(50, 70);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<double> a(3 + trial % 9), b(2 + trial % 11);
    for (double& x : a) x = trial % 2 ? std::round(u(gen)) : u(gen);  // odd trials: ties
    for (double& x : b) x = trial % 2 ? std::round(u(gen)) : u(gen);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::vector<double> all;
    for (double x : a)
      for (double y : b) all.push_back(y - x);
    std::sort(all.begin(), all.end());
    for (size_t k = 1; k <= all.size(); ++k)
      ASSERT_EQ(kth_pairwise_difference(a, b, static_cast<int64_t>(k)), shifted(all[k - 1]))
          << "trial " << trial << " k " << k;
  }
}

TEST(Stats, DoubledMidranks) {
  std::vector<int64_t> r = doubled_midranks({2.0, 1.0, 2.0, 2.0, 3.0, 4.0});
  std::vector<int64_t> want = {6, 2, 6, 6, 10, 12};
  if (wrong()) want[0] += 1;
  EXPECT_EQ(r, want);
}

TEST(Stats, SentenceSaysDirectionSizeAndVerdict) {
  // B = 61..66 (median 63.5) against A = 67..72 (median 69.5): ratio 0.9137, 8.6 % faster; shift -6 ms,
  // CI [-9, -3] (k = 6, as above); full separation 6 v 6: p = 0.0022.
  AbStats s = ab_statistics(range(67, 6), range(61, 6));
  std::string want =
      "B is 8.6 % faster than A: median 63.5 vs 69.5 ms/iteration (ratio 0.914; shift -6.0 ms, 95 % CI -9.0 to "
      "-3.0); Mann-Whitney exact p = 0.0022 (6 v 6): significant at 0.05.";
  EXPECT_EQ(s.sentence, wrong() ? want + "!" : want);
  AbStats slower = ab_statistics(range(61, 6), range(67, 6));
  EXPECT_NE(slower.sentence.find(wrong() ? "% faster" : "B is 9.4 % slower than A"), std::string::npos)
      << slower.sentence;
  AbStats small = ab_statistics({4, 5, 6}, {1, 2, 3});
  EXPECT_NE(small.sentence.find(wrong() ? "3 v 3 can reach" : "No significant difference"), std::string::npos);
  EXPECT_NE(small.sentence.find(wrong() ? "3 v 3 can reach"
                                        : "3 v 3 cannot reach p < 0.05 (the smallest possible p is 0.1)"),
            std::string::npos)
      << small.sentence;
}

TEST(Stats, GuardsNameTheSide) {
  auto message = [](const std::vector<double>& a, const std::vector<double>& b) -> std::string {
    try {
      ab_statistics(a, b);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(message({1.0}, {1, 2, 3}).find(wrong() ? "sample B" : "sample A has 1 value(s)"), std::string::npos);
  EXPECT_NE(message({1, 2}, {}).find(wrong() ? "sample A" : "sample B has 0 value(s)"), std::string::npos);
  EXPECT_NE(message({1, NAN}, {1, 2}).find(wrong() ? "sample B" : "sample A value #2 is not finite"),
            std::string::npos);
}

// The paired shift (the counter's in-run overhead): the Hodges-Lehmann location of one sample of differences and
// its Wilcoxon signed-rank interval. 1..10: the 55 Walsh averages are symmetric about 5.5; the signed-rank table's
// two-sided 5 % critical value at n = 10 is 8, so k = 9, and the 9th smallest average is 3 (cumulative counts of
// 1, 1.5, 2, 2.5, 3: 1, 2, 4, 6, 9), the 9th largest 8. One stalled iteration (1000 in place of 10) moves the mean
// to 104.5 and the location not at all.
TEST(Stats, PairedShiftHodgesLehmannAndSignedRankInterval) {
  PairedShift s = paired_shift(range(1, 10));
  EXPECT_EQ(s.n, 10);
  EXPECT_EQ(s.ci_k, 9 + wrong());
  EXPECT_DOUBLE_EQ(s.location, shifted(5.5));
  EXPECT_DOUBLE_EQ(s.ci_low, shifted(3));
  EXPECT_DOUBLE_EQ(s.ci_high, shifted(8));
  EXPECT_DOUBLE_EQ(s.mean, shifted(5.5));
  std::vector<double> stalled = range(1, 10);
  stalled.back() = 1000;
  PairedShift t = paired_shift(stalled);
  EXPECT_DOUBLE_EQ(t.mean, shifted(104.5));
  EXPECT_DOUBLE_EQ(t.location, shifted(5.5));
  EXPECT_DOUBLE_EQ(t.ci_low, shifted(3));
  EXPECT_DOUBLE_EQ(t.ci_high, shifted(501));
  // The table's critical values at n = 20 and 30 (52, 137); beyond 50 the normal approximation's floor.
  EXPECT_EQ(paired_shift(range(-7, 20)).ci_k, 53 + wrong());
  EXPECT_EQ(paired_shift(range(-7, 30)).ci_k, 138 + wrong());
  const double n = 60, z = normal_quantile(0.975);
  EXPECT_EQ(paired_shift(range(-7, 60)).ci_k,
            static_cast<int64_t>(std::floor(n * (n + 1) / 4 - z * std::sqrt(n * (n + 1) * (2 * n + 1) / 24))) + wrong());
  // Against the sorted Walsh averages themselves, on random values with ties.
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> u(-3, 9);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> d(2 + trial * 3);
    for (double& x : d) x = trial % 2 ? std::round(u(gen)) : u(gen);
    std::vector<double> walsh;
    for (size_t i = 0; i < d.size(); ++i)
      for (size_t j = i; j < d.size(); ++j) walsh.push_back((d[i] + d[j]) / 2.0);
    std::sort(walsh.begin(), walsh.end());
    const PairedShift p = paired_shift(d);
    EXPECT_DOUBLE_EQ(p.ci_low, shifted(walsh[static_cast<size_t>(p.ci_k - 1)]));
    EXPECT_DOUBLE_EQ(p.ci_high, shifted(walsh[walsh.size() - static_cast<size_t>(p.ci_k)]));
    const size_t m = walsh.size();
    EXPECT_DOUBLE_EQ(p.location, shifted(m % 2 ? walsh[m / 2] : (walsh[m / 2 - 1] + walsh[m / 2]) / 2.0));
  }
  EXPECT_THROW(paired_shift({1.0}), InputError);
  EXPECT_THROW(paired_shift({1.0, NAN}), InputError);
}

// The exact k against every one of the 2^12 sign patterns: P(T+ <= k - 1) <= alpha / 2 < P(T+ <= k).
TEST(Stats, PairedShiftExactKMatchesEnumeratingEverySign) {
  for (double alpha : {0.05, 0.1, 0.01}) {
    const int n = 12;
    std::vector<int64_t> at_most(n * (n + 1) / 2 + 1, 0);
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      int t = 0;
      for (int r = 1; r <= n; ++r)
        if (mask & (1u << (r - 1))) t += r;
      for (size_t v = static_cast<size_t>(t); v < at_most.size(); ++v) ++at_most[v];
    }
    const int64_t k = paired_shift(range(1, n), alpha).ci_k - wrong();
    EXPECT_LE(static_cast<double>(at_most[static_cast<size_t>(k - 1)]) / 4096.0, alpha / 2) << alpha;
    EXPECT_GT(static_cast<double>(at_most[static_cast<size_t>(k)]) / 4096.0, alpha / 2) << alpha;
  }
}

}  // namespace
}  // namespace loopgate
