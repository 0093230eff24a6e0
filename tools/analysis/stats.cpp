// A/B statistics (stats.h): the Mann–Whitney test as the permutation distribution of A's rank sum, counted
// exactly by a subset-sum DP over doubled mid-ranks (integers, so ties are exact too), and the Hodges–Lehmann
// shift with Moses' interval. The normal branch is SciPy's (docs/design.md "Statistics").
// Not here: reading samples, printing tables, deciding what a result means for a gate.
#include "tools/analysis/stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "trainer/common/error.h"

namespace loopgate {
namespace {

void check_side(const std::vector<double>& v, const char* side) {
  LG_INPUT_CHECK(v.size() >= 2, "A/B statistics: sample {} has {} value(s); need at least 2 per side", side,
                 v.size());
  for (size_t i = 0; i < v.size(); ++i)
    LG_INPUT_CHECK(std::isfinite(v[i]), "A/B statistics: sample {} value #{} is not finite ({})", side, i + 1,
                   v[i]);
}

// Cumulative null distribution of U (no ties) for the CI's critical value: cum[c] = P(U <= c).
std::vector<double> u_cdf_no_ties(int64_t n_a, int64_t n_b) {
  const int64_t n = n_a + n_b;
  std::vector<int64_t> ranks(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ranks[static_cast<size_t>(i)] = 2 * (i + 1);
  std::vector<double> counts = rank_sum_counts(ranks, n_a);
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  const int64_t w2_min = n_a * (n_a + 1);  // doubled rank sum at U = 0
  std::vector<double> cum(static_cast<size_t>(n_a * n_b + 1), 0.0);
  double run = 0;
  for (int64_t u = 0; u <= n_a * n_b; ++u) {
    run += counts[static_cast<size_t>(w2_min + 2 * u)];
    cum[static_cast<size_t>(u)] = run / total;
  }
  return cum;
}

// Moses: the interval [d_(k), d_(mn+1-k)] covers with probability 1 - 2 P(U <= k-1) (continuous data).
void shift_interval(AbStats& s, const std::vector<double>& a, const std::vector<double>& b) {
  const int64_t mn = s.n_a * s.n_b;
  const double half = s.alpha / 2;
  int64_t k = 0;
  if (s.n_a + s.n_b <= kExactMaxTotal) {
    std::vector<double> cum = u_cdf_no_ties(s.n_a, s.n_b);
    while (k < mn / 2 && cum[static_cast<size_t>(k)] <= half) ++k;  // k = largest with P(U <= k-1) <= alpha/2
    s.ci_reaches_level = k >= 1;
    k = std::max<int64_t>(k, 1);
    s.ci_coverage = 1.0 - 2.0 * cum[static_cast<size_t>(k - 1)];
  } else {
    const double sigma = std::sqrt(static_cast<double>(mn) * static_cast<double>(s.n_a + s.n_b + 1) / 12.0);
    k = static_cast<int64_t>(std::floor(static_cast<double>(mn) / 2.0 - normal_quantile(1.0 - half) * sigma));
    s.ci_reaches_level = k >= 1;
    k = std::max<int64_t>(k, 1);
    s.ci_coverage = 1.0 - 2.0 * (1.0 - normal_sf((static_cast<double>(k) - 0.5 - mn / 2.0) / sigma));
  }
  s.ci_k = k;
  s.ci_low = kth_pairwise_difference(a, b, k);
  s.ci_high = kth_pairwise_difference(a, b, mn + 1 - k);
}

// Numbers in the sentence: three significant digits of the larger median, the same decimals for both.
int decimals_for(double magnitude, int significant) {
  if (!(magnitude > 0)) return 1;
  int d = significant - 1 - static_cast<int>(std::floor(std::log10(magnitude)));
  return std::clamp(d, 0, 6);
}

std::string p_text(double p) {
  if (p < 1e-4) return fmt::format("{:.1e}", p);
  return fmt::format("{:.2g}", p);
}

std::string percent_text(double level) { return fmt::format("{:g} %", std::round(level * 1000.0) / 10.0); }

}  // namespace

// ---- the pieces ----

double median_of(std::vector<double> v) {
  LG_CHECK(!v.empty(), "median of an empty sample");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// Counts pairs with b_j - a_i <= t in O(n_a + n_b): for fixed j the qualifying i form a suffix of sorted a
// (floating subtraction is monotone), and that suffix only shrinks from the left as b_j grows.
static int64_t count_le(const std::vector<double>& a, const std::vector<double>& b, double t) {
  int64_t count = 0;
  size_t i = 0;
  for (double bj : b) {
    while (i < a.size() && bj - a[i] > t) ++i;
    count += static_cast<int64_t>(a.size() - i);
  }
  return count;
}

// The k-th smallest of values that are only counted, never formed: bisection on the value keeps
// count(lo) < k <= count(hi) until lo and hi are adjacent doubles; then the k-th value is hi. `lo` may hold the
// k-th itself (count(lo) >= k: returned). Memory O(1) beyond the samples, so 10^4 windows a side cost no 800 MB of
// differences.
template <class CountLe>
static double kth_by_bisection(double lo, double hi, int64_t k, CountLe count_le) {
  if (count_le(lo) >= k) return lo;
  while (true) {
    double mid = lo + (hi - lo) / 2.0;
    if (mid <= lo || mid >= hi) {
      mid = std::nextafter(lo, hi);
      if (mid >= hi) return hi;
    }
    (count_le(mid) >= k ? hi : lo) = mid;
  }
}

double kth_pairwise_difference(const std::vector<double>& a, const std::vector<double>& b, int64_t k) {
  const int64_t mn = static_cast<int64_t>(a.size() * b.size());
  LG_CHECK(k >= 1 && k <= mn, "k-th pairwise difference: k = {} outside 1..{}", k, mn);
  // From the smallest difference (count >= 1) to the largest (count = mn).
  return kth_by_bisection(b.front() - a.back(), b.back() - a.front(), k,
                          [&](double t) { return count_le(a, b, t); });
}

std::vector<int64_t> doubled_midranks(const std::vector<double>& pooled) {
  const size_t n = pooled.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return pooled[x] < pooled[y]; });
  std::vector<int64_t> ranks(n);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && pooled[order[j]] == pooled[order[i]]) ++j;
    // positions i..j-1 (0-based) hold ranks i+1..j; their mean, doubled, is i+1+j
    for (size_t t = i; t < j; ++t) ranks[order[t]] = static_cast<int64_t>(i + 1 + j);
    i = j;
  }
  return ranks;
}

// counts[k][s] over the items seen so far, k descending so each item joins a subset at most once.
std::vector<double> rank_sum_counts(const std::vector<int64_t>& ranks, int64_t n_a) {
  const int64_t total = std::accumulate(ranks.begin(), ranks.end(), int64_t{0});
  const size_t width = static_cast<size_t>(total + 1);
  std::vector<std::vector<double>> c(static_cast<size_t>(n_a + 1), std::vector<double>(width, 0.0));
  c[0][0] = 1.0;
  int64_t seen = 0, reach = 0;
  for (int64_t r : ranks) {
    ++seen;
    reach += r;
    for (int64_t k = std::min(seen, n_a); k >= 1; --k) {
      std::vector<double>& to = c[static_cast<size_t>(k)];
      const std::vector<double>& from = c[static_cast<size_t>(k - 1)];
      for (int64_t s = reach; s >= r; --s) to[static_cast<size_t>(s)] += from[static_cast<size_t>(s - r)];
    }
  }
  return c[static_cast<size_t>(n_a)];
}

double exact_two_sided_p(const std::vector<double>& counts, int64_t n_a, int64_t n_total, int64_t w2) {
  const int64_t mean2 = n_a * (n_total + 1);  // E[W] doubled
  const int64_t d = std::llabs(w2 - mean2);
  double tail = 0, total = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    total += counts[s];
    if (std::llabs(static_cast<int64_t>(s) - mean2) >= d) tail += counts[s];
  }
  return tail / total;
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

double normal_quantile(double p) {
  LG_CHECK(p > 0 && p < 1, "normal quantile of {}", p);
  double lo = -40, hi = 40;  // P(Z <= z) = 1 - sf(z), monotone: bisect to double resolution
  for (int i = 0; i < 200; ++i) {
    double mid = (lo + hi) / 2;
    (1.0 - normal_sf(mid) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// scipy.stats.mannwhitneyu(method="asymptotic", alternative="two-sided", use_continuity=True).
double normal_two_sided_p(double u_a, int64_t n_a, int64_t n_b, double tie_term) {
  const double n1 = static_cast<double>(n_a), n2 = static_cast<double>(n_b), n = n1 + n2;
  const double u = std::max(u_a, n1 * n2 - u_a);
  const double mu = n1 * n2 / 2.0;
  const double s = std::sqrt(n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0))));
  const double z = (u - mu - 0.5) / s;  // s = 0 (all values equal): z = -inf, p = 1
  return std::clamp(2.0 * normal_sf(z), 0.0, 1.0);
}

// ---- the result ----

AbStats ab_statistics(const std::vector<double>& a_in, const std::vector<double>& b_in, double alpha) {
  check_side(a_in, "A");
  check_side(b_in, "B");
  LG_INPUT_CHECK(alpha > 0 && alpha < 1, "A/B statistics: alpha must be in (0, 1) (got {})", alpha);
  std::vector<double> a = a_in, b = b_in;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  AbStats s;
  s.alpha = alpha;
  s.n_a = static_cast<int64_t>(a.size());
  s.n_b = static_cast<int64_t>(b.size());
  const int64_t n = s.n_a + s.n_b, mn = s.n_a * s.n_b;
  s.median_a = median_of(a);
  s.median_b = median_of(b);
  s.ratio = s.median_b / s.median_a;
  s.shift = mn % 2 ? kth_pairwise_difference(a, b, (mn + 1) / 2)
                   : (kth_pairwise_difference(a, b, mn / 2) + kth_pairwise_difference(a, b, mn / 2 + 1)) / 2.0;
  shift_interval(s, a, b);

  std::vector<double> pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  std::vector<int64_t> ranks = doubled_midranks(pooled);
  int64_t w2 = 0;
  for (int64_t i = 0; i < s.n_a; ++i) w2 += ranks[static_cast<size_t>(i)];
  s.u_a = static_cast<double>(w2) / 2.0 - static_cast<double>(s.n_a * (s.n_a + 1)) / 2.0;
  double tie_term = 0;
  std::vector<double> sorted = pooled;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    s.ties = s.ties || j - i > 1;
    i = j;
  }
  if (n <= kExactMaxTotal) {
    std::vector<double> counts = rank_sum_counts(ranks, s.n_a);
    s.p_value = exact_two_sided_p(counts, s.n_a, n, w2);
    int64_t far = 0;  // the most extreme attainable rank sum gives the smallest p
    const int64_t mean2 = s.n_a * (n + 1);
    for (size_t t = 0; t < counts.size(); ++t)
      if (counts[t] > 0) far = std::max<int64_t>(far, std::llabs(static_cast<int64_t>(t) - mean2));
    s.min_p = exact_two_sided_p(counts, s.n_a, n, mean2 + far);
    s.method = s.ties ? "exact with ties" : "exact";
  } else {
    s.p_value = normal_two_sided_p(s.u_a, s.n_a, s.n_b, tie_term);
    s.min_p = normal_two_sided_p(static_cast<double>(mn), s.n_a, s.n_b, tie_term);
    s.method = "normal";
  }
  s.significant = s.p_value < alpha;
  s.sentence = ab_sentence(s);
  return s;
}

std::string ab_sentence(const AbStats& s, const AbWording& w) {
  const int dm = std::max(1, decimals_for(std::max(std::fabs(s.median_a), std::fabs(s.median_b)), 3));
  const double widest = std::max({std::fabs(s.shift), std::fabs(s.ci_low), std::fabs(s.ci_high)});
  const int ds = std::max(dm, decimals_for(widest, 2));
  const bool lower = s.ratio < 1.0 || (s.ratio == 1.0 && s.shift < 0);
  if (w.descriptive)
    return fmt::format("Windows of one run per side (not independent samples; descriptive, no verdict): median {:.{}f} "
                       "vs {:.{}f} {} (ratio {:.3f}); window-level Mann-Whitney p = {} ({} v {} windows).",
                       s.median_b, dm, s.median_a, dm, w.unit, s.ratio, p_text(s.p_value), s.n_a, s.n_b);
  std::string head = s.significant
                         ? fmt::format("{} is {:.1f} % {} than {}", w.name_b, std::fabs(1.0 - s.ratio) * 100.0,
                                       lower ? w.lower : w.higher, w.name_a)
                         : fmt::format("No significant difference between {} and {}", w.name_b, w.name_a);
  const std::string ci_label = percent_text(s.ci_reaches_level ? 1.0 - s.alpha : s.ci_coverage) + " CI";
  const std::string ci_limit =
      s.ci_reaches_level ? "" : fmt::format(", the widest {} v {} allows", s.n_a, s.n_b);
  std::string out = fmt::format(
      "{}: median {:.{}f} vs {:.{}f} {} (ratio {:.3f}; shift {:.{}f} {}, {} {:.{}f} to {:.{}f}{}); Mann-Whitney {} p = "
      "{} ({} v {}): {} at {:g}.",
      head, s.median_b, dm, s.median_a, dm, w.unit, s.ratio, s.shift, ds, w.shift_unit, ci_label, s.ci_low, ds,
      s.ci_high, ds, ci_limit, s.method, p_text(s.p_value), s.n_a, s.n_b,
      s.significant ? "significant" : "not significant", s.alpha);
  if (s.min_p >= s.alpha)
    out += fmt::format(" {} v {} cannot reach p < {:g} (the smallest possible p is {}): take more samples.", s.n_a,
                       s.n_b, s.alpha, p_text(s.min_p));
  return out;
}

const char* step_time_verdict_name(StepTimeVerdictKind k) {
  switch (k) {
    case StepTimeVerdictKind::kFaster: return "faster";
    case StepTimeVerdictKind::kSlower: return "slower";
    case StepTimeVerdictKind::kEquivalent: return "equivalent";
    case StepTimeVerdictKind::kNotEnoughData: return "not enough data";
  }
  return "?";
}

int64_t step_time_runs_needed(double run_sd, double shift, double bound, double alpha) {
  const double efficiency = std::sqrt(std::acos(-1.0) / 3.0);  // Hodges-Lehmann's sd over the mean difference's
  const double margin = bound - std::fabs(shift);
  // Inside +-delta: the interval must fit in the margin (two one-sided tests at alpha, 80 % power, beta split);
  // beyond it: the two-sided test at alpha must find the shift (80 % power).
  const bool inside = margin > 0;
  const double z = inside ? normal_quantile(1.0 - alpha) + normal_quantile(0.9)
                          : normal_quantile(1.0 - alpha / 2.0) + normal_quantile(0.8);
  const double size = inside ? margin : std::fabs(shift);
  const int64_t floor_runs = inside ? 3 : 4;  // the smallest sizes that reach a 90 % interval / p < 0.05 at all
  if (size <= 0) return floor_runs;
  const double n = 2.0 * std::pow(z * efficiency * run_sd / size, 2.0);
  return std::max<int64_t>(floor_runs, static_cast<int64_t>(std::ceil(n)));
}

namespace {
double pooled_sd(const std::vector<double>& a, const std::vector<double>& b) {
  auto ss = [](const std::vector<double>& v) {
    double m = 0, s = 0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    for (double x : v) s += (x - m) * (x - m);
    return s;
  };
  return std::sqrt((ss(a) + ss(b)) / static_cast<double>(a.size() + b.size() - 2));
}
}  // namespace

StepTimeVerdict step_time_verdict(const std::vector<double>& a, const std::vector<double>& b, double alpha, double delta) {
  StepTimeVerdict v;
  v.runs_a = static_cast<int64_t>(a.size());
  v.runs_b = static_cast<int64_t>(b.size());
  if (a.size() < 2 || b.size() < 2) {
    v.sentence = fmt::format("not enough data: {} v {} run(s); runs are the unit (a run's windows are not independent "
                             "samples), and a side needs >= 2 runs (>= 4 to reach p < 0.05)", a.size(), b.size());
    return v;
  }
  const AbStats test = ab_statistics(a, b, alpha);
  const AbStats tost = ab_statistics(a, b, std::min(0.5, 2.0 * alpha));
  const double bound = delta * test.median_a;
  if (test.significant) {
    v.kind = test.shift < 0 ? StepTimeVerdictKind::kFaster : StepTimeVerdictKind::kSlower;
    v.sentence = fmt::format("{}: median of run medians {:.3f} vs {:.3f} (ratio {:.4f}); Mann-Whitney on runs p = {:.4g} "
                             "({} v {} runs) < {:g}", step_time_verdict_name(v.kind), test.median_b, test.median_a,
                             test.ratio, test.p_value, a.size(), b.size(), alpha);
  } else if (tost.ci_reaches_level && tost.ci_low > -bound && tost.ci_high < bound) {
    v.kind = StepTimeVerdictKind::kEquivalent;
    v.sentence = fmt::format("equivalent: no difference larger than {:g} % (the {:g} % interval of the shift, {:.3f} to "
                             "{:.3f}, lies inside +-{:.3f}; {} v {} runs)", delta * 100.0, (1.0 - 2.0 * alpha) * 100.0,
                             tost.ci_low, tost.ci_high, bound, a.size(), b.size());
  } else {
    v.run_sd = pooled_sd(a, b);
    v.runs_needed = step_time_runs_needed(v.run_sd, tost.shift, bound, alpha);
    const bool inside = std::fabs(tost.shift) < bound;
    v.sentence = fmt::format("not enough data: not significant (runs p = {:.4g}) and the {:g} % interval {:.3f} to "
                             "{:.3f}{} does not lie inside +-{:g} % ({:.3f}); {} v {} runs. At this spread (runs' sd "
                             "{:.3f}) about {} runs a side would {}", test.p_value, (1.0 - 2.0 * alpha) * 100.0,
                             tost.ci_low, tost.ci_high,
                             tost.ci_reaches_level ? "" : " (these sizes cannot reach that level)", delta * 100.0, bound,
                             a.size(), b.size(), v.run_sd, v.runs_needed,
                             inside ? fmt::format("show no difference beyond +-{:g} % (80 % power, if the shift stays "
                                                  "{:.3f})", delta * 100.0, tost.shift)
                                    : fmt::format("call a shift of {:.3f} significant (80 % power)", tost.shift));
  }
  return v;
}

namespace {
// Walsh averages (d_i + d_j) / 2, i <= j, at most t (d sorted): for each i, the j >= i below d's bound.
int64_t walsh_count_le(const std::vector<double>& d, double t) {
  int64_t count = 0;
  int64_t hi = static_cast<int64_t>(d.size()) - 1;
  for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i) {
    while (hi >= i && (d[static_cast<size_t>(i)] + d[static_cast<size_t>(hi)]) / 2.0 > t) --hi;
    if (hi < i) break;
    count += hi - i + 1;
  }
  return count;
}
// The k-th smallest Walsh average (d sorted), as kth_pairwise_difference: O(n) memory.
double kth_walsh_average(const std::vector<double>& d, int64_t k) {
  return kth_by_bisection(d.front(), d.back(), k, [&](double t) { return walsh_count_le(d, t); });
}
}  // namespace

PairedShift paired_shift(const std::vector<double>& d_in, double alpha) {
  check_side(d_in, "paired differences");
  LG_INPUT_CHECK(alpha > 0 && alpha < 1, "paired shift: alpha must be in (0, 1) (got {})", alpha);
  std::vector<double> d = d_in;
  std::sort(d.begin(), d.end());
  const int64_t n = static_cast<int64_t>(d.size());
  const int64_t total = n * (n + 1) / 2;
  // k: the largest with P(T+ < k) <= alpha / 2, T+ the signed-rank statistic (its values 0..total, each of the 2^n
  // sign patterns equally likely under no shift).
  int64_t k = 1;
  if (n <= 50) {
    std::vector<double> counts(static_cast<size_t>(total + 1), 0.0);
    counts[0] = 1;
    for (int64_t r = 1; r <= n; ++r)
      for (int64_t s = total; s >= r; --s) counts[static_cast<size_t>(s)] += counts[static_cast<size_t>(s - r)];
    const double all = std::ldexp(1.0, static_cast<int>(n));
    double below = 0;  // (2^n) P(T+ <= k - 1)
    k = 0;
    while (k < total && (below + counts[static_cast<size_t>(k)]) / all <= alpha / 2) below += counts[static_cast<size_t>(k++)];
    k = std::max<int64_t>(k, 1);  // too few values for the level: the widest interval
  } else {
    const double nn = static_cast<double>(n);
    const double mu = nn * (nn + 1) / 4, sd = std::sqrt(nn * (nn + 1) * (2 * nn + 1) / 24);
    k = std::max<int64_t>(1, static_cast<int64_t>(std::floor(mu - normal_quantile(1 - alpha / 2) * sd)));
  }
  PairedShift out;
  out.n = n;
  for (double x : d) out.mean += x / static_cast<double>(n);
  out.location = total % 2 ? kth_walsh_average(d, (total + 1) / 2)
                            : (kth_walsh_average(d, total / 2) + kth_walsh_average(d, total / 2 + 1)) / 2.0;
  out.ci_low = kth_walsh_average(d, k);
  out.ci_high = kth_walsh_average(d, total + 1 - k);
  out.ci_k = k;
  return out;
}

}  // namespace loopgate
