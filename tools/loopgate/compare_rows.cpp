// The judged rows of `loopgate compare` (compare_rows.h).
#include "tools/loopgate/compare_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace loopgate {

const char* compare_result_name(CompareResult r) {
  switch (r) {
    case CompareResult::kPass: return "PASS";
    case CompareResult::kFail: return "FAIL";
    case CompareResult::kNotRun: return "NOT RUN";
    case CompareResult::kInfo: return "INFO";
  }
  return "?";
}

const std::vector<ComparedField>& compared_fields() {
  static const std::vector<ComparedField> f = {
      {"lm loss", FieldRule::kEarlyIdentity, &RunEntry::lm_loss},
      {"params norm", FieldRule::kEarlyIdentity, &RunEntry::params_norm},
      {"learning rate", FieldRule::kIdentity, &RunEntry::learning_rate},
      {"optimizer learning rate", FieldRule::kIdentity, &RunEntry::optimizer_lr},
      {"number of nan iterations", FieldRule::kZeroCount, nullptr, &RunEntry::nan_iterations},
      {"number of skipped iterations", FieldRule::kZeroCount, nullptr, &RunEntry::skipped_iterations},
      {"grad norm", FieldRule::kSpread, &RunEntry::grad_norm},
      {"num zeros", FieldRule::kSpread, &RunEntry::num_zeros},
  };
  return f;
}

namespace {

std::vector<ComparedField> fields_judged(FieldRule rule) {
  std::vector<ComparedField> out;
  for (const ComparedField& f : compared_fields())
    if (f.rule == rule) out.push_back(f);
  return out;
}

std::string field_name(std::optional<LoggedValue> RunEntry::*v) {
  for (const ComparedField& f : compared_fields())
    if (f.value == v) return f.name;
  return "?";
}

std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string shown(const CompareRun& r, const RunEntry& e, const LoggedValue& v) {
  return fmt::format("{} '{}'", r.log.where(e), v.text);
}

// Identity of one field at one iteration across every run that logged it (compared with the first such run).
// Returns false (nothing compared) unless both sides logged it.
struct Agreement {
  int64_t compared = 0;
  std::set<std::string> formats;
  std::vector<std::string> problems, unlogged;
};

bool agree_at(const std::vector<CompareRun>& runs, int64_t it, const ComparedField& f, Agreement& out) {
  bool has_a = false, has_b = false;
  std::vector<std::string> missing;
  for (const CompareRun& r : runs) {
    const RunEntry* e = r.log.find(it);
    if (!e || !(e->*f.value)) {
      missing.push_back(r.log.path);
      continue;
    }
    (r.side == 'A' ? has_a : has_b) = true;
  }
  if (!has_a || !has_b) return false;
  const CompareRun* ref_run = nullptr;
  const RunEntry* ref_entry = nullptr;
  for (const CompareRun& r : runs) {
    const RunEntry* e = r.log.find(it);
    if (!e || !(e->*f.value)) continue;
    const LoggedValue& v = *(e->*f.value);
    out.formats.insert(fmt::format("{} {}", f.name, printed_format(v)));
    if (!ref_run) {
      ref_run = &r;
      ref_entry = e;
      continue;
    }
    const LoggedValue& ref = *(ref_entry->*f.value);
    if (!same_logged_value(ref, v))
      out.problems.push_back(fmt::format("iteration {} {}: {} vs {}", it, f.name, shown(*ref_run, *ref_entry, ref),
                                         shown(r, *e, v)));
  }
  if (!missing.empty()) out.unlogged.push_back(fmt::format("{} at iteration {} not logged by {}", f.name, it, join(missing)));
  ++out.compared;
  return true;
}

std::string identity_words(const std::set<std::string>& formats) {
  bool all_exact = std::all_of(formats.begin(), formats.end(),
                               [](const std::string& f) { return f.size() > 10 && f.substr(f.size() - 10) == "exact bits"; });
  std::vector<std::string> v(formats.begin(), formats.end());
  return all_exact ? "bit-identical" : fmt::format("identical as printed ({}; not bit identity)", join(v));
}

size_t count_runs(const std::vector<CompareRun>& runs, char side) {
  return static_cast<size_t>(std::count_if(runs.begin(), runs.end(), [&](const CompareRun& r) { return r.side == side; }));
}

// ---- reproducibility: where a field is held to bits and where to the spread rule ----

// Whether the baseline's own runs (>= 2) agree on `f` at every iteration where they all logged it: then the field
// is held to identity everywhere, in every run of both sides. Where they part somewhere, the configuration is
// nondeterministic for that field (reduction order, atomics), and an iteration where the runs differ is judged
// by the spread rule instead.
bool baseline_reproduces(const std::vector<CompareRun>& runs, const ComparedField& f) {
  if (count_runs(runs, 'A') < 2) return true;
  const CompareRun* first = nullptr;
  for (const CompareRun& r : runs)
    if (r.side == 'A' && !first) first = &r;
  for (const RunEntry& e : first->log.entries) {
    if (!(e.*f.value)) continue;
    for (const CompareRun& r : runs) {
      if (r.side != 'A' || &r == first) continue;
      const RunEntry* o = r.log.find(e.iteration);
      if (o && (o->*f.value) && !same_logged_value(*(e.*f.value), *(o->*f.value))) return false;
    }
  }
  return true;
}

// One iteration's values of one field in every run that logged it, by side.
struct Sides {
  double sum[2] = {0, 0}, lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
  int count[2] = {0, 0};
  bool exact = true;
  std::vector<std::string> shown[2];
  double mean(int s) const { return sum[s] / count[s]; }
  double spread(int s) const { return hi[s] - lo[s]; }
};

Sides sides_at(const std::vector<CompareRun>& runs, int64_t it, const ComparedField& f) {
  Sides out;
  for (const CompareRun& r : runs) {
    const RunEntry* e = r.log.find(it);
    if (!e || !(e->*f.value)) continue;
    const LoggedValue& v = *(e->*f.value);
    const int s = r.side == 'A' ? 0 : 1;
    out.sum[s] += v.value;
    out.lo[s] = std::min(out.lo[s], v.value);
    out.hi[s] = std::max(out.hi[s], v.value);
    ++out.count[s];
    out.shown[s].push_back(shown(r, *e, v));
    out.exact = out.exact && v.exact;
  }
  return out;
}

std::string number(double v, bool exact) { return exact ? hex(v) : fmt::format("{:.6g}", v); }

}  // namespace

// The spread rule where the runs are not reproducible: |mean A - mean B| within the larger within-side range,
// times a factor for the runs a side. The seed's rule (factor 1) calls 22 % of an A/A pair's noisy iterations
// different at 2 runs a side and 4.9 % at 3; the factors hold that rate at <= 1e-4 an iteration under iid
// noise (test_compare_known_answers.cpp, KnownAnswersNoise, simulates it), and reach 1 at 7 runs a side.
double spread_factor(int runs_per_side) {
  static const double kFactor[] = {0, 0, 56.0, 5.8, 2.5, 1.7, 1.25};
  return runs_per_side < 7 ? kFactor[std::max(runs_per_side, 0)] : 1.0;
}

namespace {

// The field's noise over the whole run: the baseline's largest range relative to its mean (the candidate cannot
// widen its own allowance). Rounding noise is
// discrete: at a single iteration both sides' few runs can land on one value each, two different values, so the
// range at that iteration alone (0) would call the noise a difference.
double relative_noise(const std::vector<CompareRun>& runs, const ComparedField& f) {
  std::set<int64_t> iterations;
  for (const CompareRun& r : runs)
    for (const RunEntry& e : r.log.entries) iterations.insert(e.iteration);
  double out = 0;
  for (int64_t it : iterations) {
    const Sides s = sides_at(runs, it, f);
    if (s.count[0] >= 2 && s.mean(0) != 0 && std::isfinite(s.spread(0)))
      out = std::max(out, s.spread(0) / std::fabs(s.mean(0)));
  }
  return out;
}

// The problem, if any, of one noisy iteration under the spread rule: the range is this iteration's, or the field's
// noise over the run at the baseline's magnitude here, whichever is larger.
std::optional<std::string> beyond_spread(const Sides& s, int64_t it, const std::string& field, double noise) {
  const double diff = std::fabs(s.mean(0) - s.mean(1));
  const double here = std::max(s.spread(0), s.spread(1));
  const double spread = std::max(here, noise * std::fabs(s.mean(0)));
  const double factor = spread_factor(std::min(s.count[0], s.count[1]));
  if (diff <= factor * spread) return std::nullopt;
  return fmt::format("iteration {} {}: |mean A - mean B| = {} > {:g} x the within-side spread {} (runs not "
                     "reproducible in this field; the range here {}): A {}; B {}", it, field, number(diff, s.exact),
                     factor, number(spread, s.exact), number(here, s.exact), join(s.shown[0]), join(s.shown[1]));
}

// ---- the rows ----

// The first iteration where both sides logged an early-identity field; -1 if none.
int64_t first_shared_iteration(const std::vector<CompareRun>& runs) {
  std::set<int64_t> a, b;
  for (const CompareRun& r : runs)
    for (const RunEntry& e : r.log.entries)
      for (const ComparedField& f : fields_judged(FieldRule::kEarlyIdentity))
        if (e.*f.value) (r.side == 'A' ? a : b).insert(e.iteration);
  for (int64_t it : a)
    if (b.count(it)) return it;
  return -1;
}

bool shares_any(const std::vector<CompareRun>& runs, int64_t from, int64_t to) {
  for (int64_t it = from; it <= to; ++it) {
    bool a = false, b = false;
    for (const CompareRun& r : runs)
      if (const RunEntry* e = r.log.find(it))
        for (const ComparedField& f : fields_judged(FieldRule::kEarlyIdentity))
          if (e->*f.value) (r.side == 'A' ? a : b) = true;
    if (a && b) return true;
  }
  return false;
}

CompareRow early_identity(const std::vector<CompareRun>& runs, int64_t k) {
  CompareRow row;
  // A resumed run (Megatron's *_2nd golden values, a log that starts at the resume) shares no step in 1-k: its
  // early window starts at the first step both sides logged, the resume point (or step 0 of older files).
  int64_t from = 1;
  if (const int64_t shared = first_shared_iteration(runs); shared >= 0 && !shares_any(runs, 1, k)) {
    from = shared;
    row.notes.push_back(fmt::format("no step in 1-{} logged by both sides: the window starts at step {}, the first "
                                    "both logged (a resumed run's resume point)", k, shared));
  }
  const int64_t to = from + k - 1;
  row.check = fmt::format("lm loss, params norm @ {}-{}", from, to);
  const bool several = count_runs(runs, 'A') >= 2 && count_runs(runs, 'B') >= 2;
  Agreement ag;
  std::set<int64_t> iterations;
  int64_t noisy = 0;
  std::map<std::string, double> noise;  // per field, the baseline's noise over the run, computed once
  for (int64_t it = from; it <= to; ++it)
    for (const ComparedField& f : fields_judged(FieldRule::kEarlyIdentity)) {
      Agreement one;
      if (!agree_at(runs, it, f, one)) continue;
      iterations.insert(it);
      ag.compared += one.compared;
      ag.formats.insert(one.formats.begin(), one.formats.end());
      ag.unlogged.insert(ag.unlogged.end(), one.unlogged.begin(), one.unlogged.end());
      if (one.problems.empty()) continue;
      if (several && !baseline_reproduces(runs, f)) {  // the configuration's own noise: the spread rule
        ++noisy;
        if (!noise.count(f.name)) noise[f.name] = relative_noise(runs, f);
        if (auto p = beyond_spread(sides_at(runs, it, f), it, f.name, noise[f.name])) ag.problems.push_back(*p);
        continue;
      }
      ag.problems.insert(ag.problems.end(), one.problems.begin(), one.problems.end());
    }
  row.notes.insert(row.notes.end(), ag.unlogged.begin(), ag.unlogged.end());
  if (ag.compared == 0) {
    row.detail = fmt::format("no iteration in {}-{} where both sides logged lm loss or params norm", from, to);
    return row;
  }
  std::vector<std::string> its;
  for (int64_t it : iterations) its.push_back(std::to_string(it));
  row.problems = ag.problems;
  row.result = ag.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = ag.problems.empty()
                   ? fmt::format("{} at iteration(s) {} in {} runs", identity_words(ag.formats), join(its), runs.size())
                   : fmt::format("{} difference(s); first: {}", ag.problems.size(), ag.problems.front());
  if (noisy > 0 && ag.problems.empty())
    row.detail += fmt::format("; {} value(s) where the baseline's own runs differ judged by the spread rule instead",
                              noisy);
  if (!ag.unlogged.empty()) row.detail += fmt::format(" ({} value(s) not logged, see notes)", ag.unlogged.size());
  return row;
}

CompareRow learning_rate_identity(const std::vector<CompareRun>& runs) {
  CompareRow row;
  row.check = "learning rate";
  std::set<int64_t> iterations, compared;
  for (const CompareRun& r : runs)
    for (const RunEntry& e : r.log.entries) iterations.insert(e.iteration);
  Agreement ag;
  std::vector<std::string> fields;
  for (const ComparedField& f : fields_judged(FieldRule::kIdentity)) {
    bool any = false;
    for (int64_t it : iterations)
      if (agree_at(runs, it, f, ag)) any = compared.insert(it).second || true;
    if (any) fields.push_back(f.name);
  }
  if (ag.compared == 0) {
    row.detail = "no iteration where both sides logged the learning rate";
    return row;
  }
  row.problems = ag.problems;
  row.result = ag.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  const std::string what = fields.size() > 1 ? fmt::format(" ({})", join(fields)) : "";
  row.detail = ag.problems.empty()
                   ? fmt::format("{} at {} iterations logged by both sides{} ({} runs)", identity_words(ag.formats),
                                 compared.size(), what, runs.size())
                   : fmt::format("{} difference(s) over {} iterations; first: {}", ag.problems.size(), compared.size(),
                                 ag.problems.front());
  return row;
}

CompareRow nan_and_skipped(const std::vector<CompareRun>& runs) {
  CompareRow row;
  row.check = "nan / skipped iterations";
  int64_t entries = 0;
  for (const CompareRun& r : runs) {
    bool counters = false;
    for (const RunEntry& e : r.log.entries) {
      ++entries;
      const std::string at = r.log.kind == RunKind::kMegatronLog
                                 ? fmt::format("{}: iteration {}", r.log.where(e), e.iteration)
                                 : r.log.where(e);
      for (const ComparedField& f : fields_judged(FieldRule::kZeroCount)) {
        counters = counters || (e.*f.count).has_value();
        if ((e.*f.count).value_or(0) > 0) row.problems.push_back(fmt::format("{}: {}: {}", at, f.name, *(e.*f.count)));
      }
      // A NaN or Inf value is a NaN iteration whether or not the run counts them (a Trace's, golden values').
      for (std::optional<LoggedValue> RunEntry::*v : {&RunEntry::lm_loss, &RunEntry::grad_norm, &RunEntry::params_norm})
        if (e.*v && !std::isfinite((e.*v)->value))
          row.problems.push_back(fmt::format("{}: {}: {}", at, field_name(v), (e.*v)->text));
    }
    if (!counters)
      row.notes.push_back(fmt::format("{}: no skipped / nan counters ({}): values checked for NaN only", r.log.path,
                                      run_kind_name(r.log.kind)));
  }
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = row.problems.empty()
                   ? fmt::format("0 NaN, 0 skipped iterations in {} runs ({} logged iterations)", runs.size(), entries)
                   : fmt::format("{} problem(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

// Every logged value of lm loss, params norm, grad norm and num zeros over the whole run (>= 2 runs a side). A
// field the baseline's runs reproduce exactly at every iteration is held to identity at every iteration, in every
// run (a candidate whose runs part where the baseline's never do fails too). A field they do not reproduce: an
// iteration where all runs agree is identical; one where they part is judged by the seed's spread rule (the DP=64
// argument: the between-side mean difference within the within-side range), widened for few runs (spread_factor).
CompareRow over_the_run(const std::vector<CompareRun>& runs) {
  CompareRow row;
  row.check = "loss, norms, zeros over run";
  const size_t na = count_runs(runs, 'A'), nb = count_runs(runs, 'B');
  if (na < 2 || nb < 2) {
    row.detail = fmt::format("not run: needs >= 2 runs per side to know whether a side reproduces itself (A {}, B {}); "
                             "not a pass", na, nb);
    return row;
  }
  std::vector<std::string> exact_fields, noisy_fields;
  std::set<std::string> formats;
  for (const ComparedField& f : compared_fields()) {
    if (f.rule != FieldRule::kEarlyIdentity && f.rule != FieldRule::kSpread) continue;
    const bool reproduces = baseline_reproduces(runs, f);
    const double noise = reproduces ? 0.0 : relative_noise(runs, f);
    int64_t identical = 0, noisy = 0;
    std::set<int64_t> iterations;
    for (const RunEntry& e : runs.front().log.entries) iterations.insert(e.iteration);
    for (int64_t it : iterations) {
      const Sides s = sides_at(runs, it, f);
      if (s.count[0] + s.count[1] != static_cast<int>(runs.size())) continue;  // judged where every run logged it
      Agreement ag;
      agree_at(runs, it, f, ag);
      formats.insert(ag.formats.begin(), ag.formats.end());
      if (ag.problems.empty()) {
        ++identical;
        continue;
      }
      if (reproduces) {
        for (const std::string& p : ag.problems)
          row.problems.push_back(p + " (the baseline's runs are identical in this field at every iteration)");
        continue;
      }
      ++noisy;
      if (auto p = beyond_spread(s, it, f.name, noise)) row.problems.push_back(*p);
    }
    if (identical + noisy == 0 && row.problems.empty()) {
      row.notes.push_back(fmt::format("{}: no iteration where every run logged it", f.name));
      continue;
    }
    if (reproduces) exact_fields.push_back(fmt::format("{} at {} iterations", f.name, identical));
    else noisy_fields.push_back(fmt::format("{} ({} iterations identical, {} by the spread rule)", f.name, identical, noisy));
  }
  if (exact_fields.empty() && noisy_fields.empty()) {
    row.detail = "not run: no iteration where every run logged lm loss, params norm, grad norm or num zeros";
    return row;
  }
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  std::string detail;
  if (!exact_fields.empty()) detail = fmt::format("{}: {}", identity_words(formats), join(exact_fields));
  if (!noisy_fields.empty())
    detail += fmt::format("{}baseline not reproducible, spread rule x{:g} where the runs part: {}",
                          detail.empty() ? "" : "; ", spread_factor(static_cast<int>(std::min(na, nb))),
                          join(noisy_fields));
  row.detail = row.problems.empty() ? fmt::format("{} ({} v {} runs)", detail, na, nb)
                                    : fmt::format("{} problem(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

}  // namespace

std::vector<CompareRow> judged_rows(const std::vector<CompareRun>& runs, int64_t early) {
  return {early_identity(runs, early), learning_rate_identity(runs), nan_and_skipped(runs), over_the_run(runs)};
}

}  // namespace loopgate
