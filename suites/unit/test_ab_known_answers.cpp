// Known answers for `loopgate ab` (tools/loopgate/ab.h, tools/analysis/stats.h) from Megatron logs written here: ties
// across the sides, one side constant, both sides constant and equal, too few windows, and mixed time sources.
// The expected values are worked by hand in the comments (the permutation distribution of the rank sum,
// enumerated over the hypergeometric count of one value in A), not taken from the tool.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every expected value, so every test here fails.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "suites/unit/wrong.h"
#include "tools/loopgate/ab.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

// A Megatron log whose iteration i (1-based) took ms[i-1] by the elapsed field; stamped: each line also carries the
// wall clock, 0.5 s apart (so timestamps give 500 ms a window, not the field's values).
RunLog megatron_log(const std::string& name, const std::vector<double>& ms, bool stamped = false) {
  std::string text;
  for (size_t i = 0; i < ms.size(); ++i) {
    const int it = static_cast<int>(i) + 1;
    if (stamped) text += fmt::format(" [2026-12-01 10:00:{:02d}.{}] ", it / 2, it % 2 ? "500000" : "000000");
    text += fmt::format("iteration {:>8}/{:>8} | elapsed time per iteration (ms): {:.1f} | lm loss: 5.000000E+00 |\n",
                        it, ms.size(), ms[i]);
  }
  return parse_megatron_log(text, name);
}

StepTimeOptions no_warmup() {
  StepTimeOptions o;
  o.warmup_windows = 0;  // every window is a sample (the known answers are about the statistics)
  return o;
}

AbStats stats_of(const std::vector<double>& a, const std::vector<double>& b) {
  const AbSamples sa = step_time_samples(megatron_log("a.log", a), no_warmup(), "A");
  const AbSamples sb = step_time_samples(megatron_log("b.log", b), no_warmup(), "B");
  EXPECT_EQ(sa.samples, a);
  return ab_statistics(sa.samples, sb.samples, 0.05);
}

// Pooled: five 100s and five 101s; mid-ranks 3 and 8. A holds four 100s: W = 4*3 + 8 = 20, E W = 27.5, |W - E W| =
// 7.5. With k 100s in A, W = 40 - 5k, so |W - E W| >= 7.5 for k in {0, 1, 4, 5}: p = (1 + 25 + 25 + 1) / C(10,5) =
// 52/252. U(A): A's 100s tie B's one 100 (4 x 0.5), A's 101 beats it (1) and ties B's four 101s (4 x 0.5): 5.
TEST(AbKnownAnswers, TiesAcrossTheSides) {
  const AbStats s = stats_of({100, 100, 100, 100, 101}, {100, 101, 101, 101, 101});
  EXPECT_TRUE(s.ties);
  EXPECT_EQ(s.method, "exact with ties");
  EXPECT_DOUBLE_EQ(s.u_a, 5.0 + wrong());
  EXPECT_NEAR(s.p_value, 52.0 / 252.0 + wrong(), 1e-12);
  EXPECT_FALSE(s.significant);
}

// A constant at 100, B at 90..95: every pair has A larger, U(A) = 36 of 36. Only A = the six 100s or A = the six
// others is that far from E W, so p = 2 / C(12,6) = 2/924. Shift: the median of b - a over {-10..-5} x 6 = -7.5;
// ratio 92.5 / 100.
TEST(AbKnownAnswers, OneSideConstant) {
  const AbStats s = stats_of({100, 100, 100, 100, 100, 100}, {90, 91, 92, 93, 94, 95});
  EXPECT_DOUBLE_EQ(s.u_a, 36.0 - wrong());
  EXPECT_NEAR(s.p_value, 2.0 / 924.0 + wrong(), 1e-12);
  EXPECT_DOUBLE_EQ(s.shift, -7.5 + wrong());
  EXPECT_DOUBLE_EQ(s.ratio, 0.925 + wrong());
  EXPECT_TRUE(s.significant);
}

// Both sides constant and equal: every pair ties, U(A) = 12.5 of 25, every split gives the same W, p = 1, no shift.
TEST(AbKnownAnswers, BothSidesConstantAndEqual) {
  const AbStats s = stats_of({100, 100, 100, 100, 100}, {100, 100, 100, 100, 100});
  EXPECT_DOUBLE_EQ(s.u_a, 12.5 + wrong());
  EXPECT_DOUBLE_EQ(s.p_value, 1.0 - wrong());
  EXPECT_DOUBLE_EQ(s.shift, 0.0 + wrong());
  EXPECT_FALSE(s.significant);
}

// Three lines, the default warm-up of one window dropped, plus the line after iteration 1 (Megatron's elapsed field
// still averages iteration 1 in): 1 window left, fewer than the 2 a side needs: an InputError naming side and file.
TEST(AbKnownAnswers, TooFewWindowsNameTheSideAndFile) {
  const AbSamples s = step_time_samples(megatron_log("short.log", {900, 600, 610}), StepTimeOptions{}, "A");
  EXPECT_EQ(s.samples.size(), 1u + static_cast<size_t>(wrong()));
  try {
    require_samples(s, StepTimeOptions{});
    ADD_FAILURE() << "1 window accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(wrong() ? "B (short.log)" : "A (short.log): 1 step-time window(s) left"),
              std::string::npos)
        << e.what();
  }
}

// A stamped (wall clock between lines, 500 ms a window), B not (the elapsed field): the report says they differ.
TEST(AbKnownAnswers, MixedTimeSourcesAreSaid) {
  StepTimeOptions o = no_warmup();
  const AbSamples a = step_time_samples(megatron_log("a.log", {600, 600, 600, 600, 600}, true), o, "A");
  const AbSamples b = step_time_samples(megatron_log("b.log", {600, 600, 600, 600, 600}), o, "B");
  EXPECT_EQ(a.source, "timestamps");
  EXPECT_NE(b.source, "timestamps");
  EXPECT_EQ(a.samples.front(), 500.0 + wrong());  // the clock between lines, not the field's 600
  const std::string note = mixed_sources_note(a, b);
  EXPECT_NE(note.find(wrong() ? "A and A" : "A and B measured step time differently (A: timestamps; B: "),
            std::string::npos)
      << note;
  EXPECT_EQ(mixed_sources_note(b, b).empty(), !wrong());
  EXPECT_EQ(ab_report_json(a, b, ab_statistics(a.samples, b.samples)).contains("mixed_sources"), !wrong());
}

}  // namespace
}  // namespace loopgate
