// The LR golden cases (fixtures/golden.cpp lr_cases()) against plausible wrong schedulers. Each variant below is
// Megatron's get_lr (optimizer_param_scheduler.py, written out here independently of the port) with one mistake a
// port could make; each must differ from the scheduler port in at least one bit on at least one of the cases that
// exist to tell formulas apart (kRoundingCases), and the table records which variants the original cases
// (lr 1e-3, min 1e-4, init 0) could not tell apart at all. Every case's sequence, for every fixture's global batch,
// equals this file's Megatron formula bit for bit, in the scheduler port and in golden/lr_sequences.json.
// Not here: the loop's trip of the LR to the log (the lr_schedule gate).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-derived expectation, so every test here fails.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fixtures/golden.h"
#include "suites/unit/wrong.h"
#include "trainer/loop/trace.h"
#include "trainer/optim/scheduler.h"

namespace loopgate {
namespace {

// The cases added to tell formulas apart by their last bit; every other case of lr_cases() is an original one.
const std::vector<std::string> kRoundingCases = {"cosine-warmup7-init", "linear-warmup5-init",
                                                 "inverse-square-root-floor-init"};
bool is_rounding_case(const LrCase& c) {
  return std::find(kRoundingCases.begin(), kRoundingCases.end(), c.name) != kRoundingCases.end();
}

// ---- Megatron's get_lr and the wrong variants ----

enum class Variant {
  kMegatron,
  kWarmupLt,             // `<` instead of `<=` at the warmup boundary
  kWarmupInitIgnored,    // warmup from 0: --lr-warmup-init ignored
  kWarmupNextStep,       // warmup computed with num_steps + 1
  kWarmupRatioFirst,     // init + (lr - init) * (n / w): the ratio rounded first
  kWarmupLerp,           // init * (1 - t) + lr * t
  kRatioFromNumSteps,    // decay ratio from num_steps, not num_steps - warmup
  kRatioOverAllDecay,    // decay ratio over decay_steps, not decay_steps - warmup
  kCosineOffByOne,       // cosine ratio (n_ + 1) / d_: one sample late
  kCosinePiNOverD,       // cos(pi * n_ / d_): pi * n_ rounded first, not pi * ratio
  kCosineMaxMinus,       // lr - (1 - coeff) * (lr - min) instead of min + coeff * (lr - min)
  kLinearMaxMinus,       // lr - ratio * (lr - min) instead of min + (1 - ratio) * (lr - min)
  kIsqrtSqrtOfRatio,     // lr * sqrt(w / n) instead of lr * w**0.5 / n**0.5
  kIsqrtNoFloor,         // inverse-square-root without max(min_lr, lr), as the linear/cosine path has none
};

struct VariantRow {
  Variant v;
  const char* name;
  bool original_cases_tell;  // derived below, per variant: could the original cases (init 0) see it at all?
};

// The original cases see a variant where it changes a value they reach: anything with warmup > 0 moves under
// num_steps + 1; the decay-ratio variants move every cosine value past a warmup of 1-2 iterations; the rounding
// orders of cosine, linear and isqrt move some of 160 decay values. They cannot see `<` (their warmup ends at
// lr exactly: (lr * w) / w == lr == min + (lr - min)), an ignored init (theirs is 0) or a missing isqrt floor
// (lr 1e-3 * sqrt(5.28 / 160) > min 1e-4: the floor never acts). The warmup orders show in a few warmup values
// where n / w is inexact.
const std::vector<VariantRow> kVariants = {
    {Variant::kWarmupLt, "warmup-boundary-lt", false},
    {Variant::kWarmupInitIgnored, "warmup-init-ignored", false},
    {Variant::kWarmupNextStep, "warmup-num-steps-plus-1", true},
    {Variant::kWarmupRatioFirst, "warmup-ratio-first", true},
    {Variant::kWarmupLerp, "warmup-lerp", true},
    {Variant::kRatioFromNumSteps, "decay-ratio-from-num-steps", true},
    {Variant::kRatioOverAllDecay, "decay-ratio-over-all-decay-steps", true},
    {Variant::kCosineOffByOne, "cosine-ratio-off-by-one", true},
    {Variant::kCosinePiNOverD, "cosine-pi-n-over-d", true},
    {Variant::kCosineMaxMinus, "cosine-max-minus", true},
    {Variant::kLinearMaxMinus, "linear-max-minus", true},
    {Variant::kIsqrtSqrtOfRatio, "inverse-square-root-sqrt-of-ratio", true},
    {Variant::kIsqrtNoFloor, "inverse-square-root-no-floor", false},
};

// The constructor arguments in samples, as training.py get_optimizer_param_scheduler makes them.
struct Samples {
  double init, max_lr, min_lr, warmup;
  int64_t decay, wsd_decay = 0;
  LrDecayStyle style;
  WsdDecayStyle wsd_style;
};

Samples samples_of(const SchedulerIters& s, int64_t gbs) {
  Samples m{s.lr_warmup_init, s.lr, s.min_lr, 0.0, *s.lr_decay_iters * gbs, 0, s.lr_decay_style, s.lr_wsd_decay_style};
  m.warmup = s.lr_warmup_fraction ? *s.lr_warmup_fraction * static_cast<double>(m.decay)
                                  : static_cast<double>(s.lr_warmup_iters * gbs);
  if (s.lr_wsd_decay_iters) m.wsd_decay = *s.lr_wsd_decay_iters * gbs;
  return m;
}

// megatron/core/optimizer_param_scheduler.py get_lr in Python's operation order, with one variant's change.
double get_lr(const Samples& m, int64_t num_steps, Variant v) {
  const double n = static_cast<double>(num_steps), w = m.warmup;
  const bool in_warmup = v == Variant::kWarmupLt ? n < w : n <= w;
  if (w > 0 && in_warmup) {
    switch (v) {
      case Variant::kWarmupInitIgnored: return 0.0 + (m.max_lr - 0.0) * n / w;
      case Variant::kWarmupNextStep: return m.init + (m.max_lr - m.init) * (n + 1.0) / w;
      case Variant::kWarmupRatioFirst: return m.init + (m.max_lr - m.init) * (n / w);
      case Variant::kWarmupLerp: return m.init * (1.0 - n / w) + m.max_lr * (n / w);
      default: return m.init + (m.max_lr - m.init) * n / w;
    }
  }
  if (m.style == LrDecayStyle::kConstant) return m.max_lr;
  if (num_steps > m.decay) return m.min_lr;
  if (m.style == LrDecayStyle::kInverseSquareRoot) {
    const double ws = std::max(w, 1.0), ns = std::max(n, 1.0);
    const double lr = v == Variant::kIsqrtSqrtOfRatio ? m.max_lr * std::sqrt(ws / ns)
                                                      : m.max_lr * std::pow(ws, 0.5) / std::pow(ns, 0.5);
    if (v == Variant::kIsqrtNoFloor) return lr;
    return m.min_lr > lr ? m.min_lr : lr;  // Python max(min_lr, lr): the first unless the second is larger
  }
  double n_ = n - w, d_ = static_cast<double>(m.decay) - w;
  if (v == Variant::kRatioFromNumSteps) n_ = n;
  if (v == Variant::kRatioOverAllDecay) d_ = static_cast<double>(m.decay);
  if (v == Variant::kCosineOffByOne && m.style == LrDecayStyle::kCosine) n_ += 1.0;
  const double ratio = n_ / d_, delta = m.max_lr - m.min_lr;
  double coeff = 1.0;
  if (m.style == LrDecayStyle::kLinear) {
    if (v == Variant::kLinearMaxMinus) return m.max_lr - ratio * delta;
    coeff = 1.0 - ratio;
  } else if (m.style == LrDecayStyle::kCosine) {
    coeff = 0.5 * (std::cos(v == Variant::kCosinePiNOverD ? M_PI * n_ / d_ : M_PI * ratio) + 1.0);
    if (v == Variant::kCosineMaxMinus) return m.max_lr - (1.0 - coeff) * delta;
  } else {  // WSD
    const int64_t anneal_start = m.decay - m.wsd_decay;
    if (num_steps > anneal_start) {
      const double r = static_cast<double>(num_steps - anneal_start) / static_cast<double>(m.wsd_decay);
      switch (m.wsd_style) {
        case WsdDecayStyle::kLinear: coeff = 1.0 - r; break;
        case WsdDecayStyle::kCosine: coeff = 0.5 * (std::cos(M_PI * r) + 1.0); break;
        case WsdDecayStyle::kExponential: coeff = 2.0 * std::pow(0.5, r) - 1.0; break;
        case WsdDecayStyle::kMinusSqrt: coeff = 1.0 - std::sqrt(r); break;
      }
    }
  }
  return m.min_lr + coeff * delta;
}

// The LR logged at iterations 1..kLrIterations: the scheduler steps by the global batch after each successful one.
std::vector<double> sequence(const LrCase& c, int64_t gbs, Variant v) {
  const Samples m = samples_of(c.schedule, gbs);
  std::vector<double> out;
  int64_t num_steps = 0;
  for (int64_t it = 1; it <= kLrIterations; ++it) {
    if (std::find(c.skipped_iterations.begin(), c.skipped_iterations.end(), it) == c.skipped_iterations.end())
      num_steps += gbs;
    out.push_back(get_lr(m, num_steps, v));
  }
  return out;
}

// Units in the last place between two doubles of one sign.
int64_t ulps(double a, double b) {
  int64_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x > y ? x - y : y - x;
}

struct Differences {
  int64_t count = 0;
  std::string first;  // case, global batch, iteration, port vs variant, ulps
  int64_t min_ulps = 0;
};

// Where the variant differs from the scheduler port, over `cases` and every fixture's global batch.
Differences differences(Variant v, bool rounding_cases) {
  Differences d;
  for (const LrCase& c : lr_cases()) {
    if (is_rounding_case(c) != rounding_cases) continue;
    for (int64_t gbs : fixture_global_batches()) {
      const std::vector<double> port = expected_lr_sequence(c, gbs), bad = sequence(c, gbs, v);
      for (size_t i = 0; i < port.size(); ++i) {
        if (same_bits(port[i], bad[i])) continue;
        const int64_t u = ulps(port[i], bad[i]);
        if (d.count++ == 0)
          d.first = fmt::format("{} gbs {} iteration {}: port {} variant {} ({} ulp)", c.name, gbs, i + 1,
                                hex(port[i]), hex(bad[i]), u);
        d.min_ulps = d.count == 1 ? u : std::min(d.min_ulps, u);
      }
    }
  }
  return d;
}

// ---- tests ----

TEST(LrGoldenCases, TheRoundingCasesAreInTheCatalogueWithANonZeroWarmupInit) {
  size_t found = 0;
  for (const LrCase& c : lr_cases()) {
    if (!is_rounding_case(c)) continue;
    ++found;
    EXPECT_NE(c.schedule.lr_warmup_init, wrong() ? c.schedule.lr_warmup_init : 0.0) << c.name;
    EXPECT_GT(c.schedule.lr_warmup_iters, 0) << c.name;
  }
  EXPECT_EQ(found, kRoundingCases.size() + wrong());
}

// Every case (original and new) for every fixture's global batch: the port's sequence, and golden/'s, equal
// Megatron's formula written out above, bit for bit.
TEST(LrGoldenCases, EveryCaseEqualsMegatronsFormulaInThePortAndInGolden) {
  const nlohmann::json golden = read_json_file(default_golden_dir() + "/lr_sequences.json");
  for (const LrCase& c : lr_cases()) {
    for (int64_t gbs : fixture_global_batches()) {
      std::vector<double> want = sequence(c, gbs, Variant::kMegatron);
      if (wrong()) want[0] = std::nextafter(want[0], 1.0);
      const std::vector<double> port = expected_lr_sequence(c, gbs);
      const std::vector<double> file = golden_lr_sequence(golden, c.name, gbs);
      ASSERT_EQ(port.size(), want.size());
      ASSERT_EQ(file.size(), want.size()) << c.name << " gbs " << gbs;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_TRUE(same_bits(port[i], want[i])) << c.name << " gbs " << gbs << " iteration " << i + 1 << ": port "
                                                 << hex(port[i]) << " Megatron " << hex(want[i]);
        EXPECT_TRUE(same_bits(file[i], want[i])) << c.name << " gbs " << gbs << " iteration " << i + 1
                                                 << ": golden " << hex(file[i]) << " Megatron " << hex(want[i]);
      }
    }
  }
}

// Each wrong variant differs from the port on at least one rounding case; whether the original cases could see it
// at all is the table's column (three of them they could not).
TEST(LrGoldenCases, EveryVariantDiffersOnARoundingCaseAndTheOriginalCasesMissThree) {
  for (const VariantRow& row : kVariants) {
    const Differences fresh = differences(row.v, /*rounding_cases=*/true);
    const Differences original = differences(row.v, /*rounding_cases=*/false);
    EXPECT_GT(fresh.count, wrong() ? fresh.count : 0) << row.name << ": no rounding case tells it from the port";
    EXPECT_EQ(original.count > 0, row.original_cases_tell != static_cast<bool>(wrong()))
        << row.name << ": the original cases " << (original.count > 0 ? "do" : "do not") << " tell it apart ("
        << original.count << " values; first: " << original.first << ")";
    std::printf("%-34s rounding cases: %4lld values differ (min %lld ulp; first %s); original cases: %lld\n", row.name,
                static_cast<long long>(fresh.count), static_cast<long long>(fresh.min_ulps), fresh.first.c_str(),
                static_cast<long long>(original.count));
  }
}

// The boundary itself, by hand: for the cosine rounding case at gbs 8 the warmup ends (iteration 7) one ulp below
// lr, and `<` would log lr there; the original cosine cases end warmup at lr exactly.
TEST(LrGoldenCases, WarmupEndsOneUlpBelowLrInTheCosineRoundingCase) {
  const LrCase& c = find_lr_case("cosine-warmup7-init");
  const std::vector<double> port = expected_lr_sequence(c, 8);
  EXPECT_EQ(ulps(port[6], c.schedule.lr), 1 + wrong());
  EXPECT_TRUE(same_bits(sequence(c, 8, Variant::kWarmupLt)[6], c.schedule.lr));
  const LrCase& original = find_lr_case("cosine-skipped-steps");  // warmup 2, lr 1e-3, init 0
  EXPECT_EQ(ulps(expected_lr_sequence(original, 8)[1], original.schedule.lr), wrong());
}

}  // namespace
}  // namespace loopgate
