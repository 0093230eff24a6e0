// The judged rows of `loopgate compare` (compare_rows.h).
#include "tools/loopgate/compare_rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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
  Agreement ag;
  std::set<int64_t> iterations;
  for (int64_t it = from; it <= to; ++it)
    for (const ComparedField& f : fields_judged(FieldRule::kEarlyIdentity))
      if (agree_at(runs, it, f, ag)) iterations.insert(it);
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
  if (!ag.unlogged.empty()) row.detail += fmt::format(" ({} value(s) not logged, see notes)", ag.unlogged.size());
  return row;
}

CompareRow learning_rate_identity(const std::vector<CompareRun>& runs) {
  CompareRow row;
  row.check = "learning rate";
  std::set<int64_t> iterations;
  for (const CompareRun& r : runs)
    for (const RunEntry& e : r.log.entries) iterations.insert(e.iteration);
  Agreement ag;
  for (int64_t it : iterations)
    for (const ComparedField& f : fields_judged(FieldRule::kIdentity)) agree_at(runs, it, f, ag);
  if (ag.compared == 0) {
    row.detail = "no iteration where both sides logged the learning rate";
    return row;
  }
  row.problems = ag.problems;
  row.result = ag.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = ag.problems.empty()
                   ? fmt::format("{} at {} iterations logged by both sides ({} runs)", identity_words(ag.formats),
                                 ag.compared, runs.size())
                   : fmt::format("{} difference(s) over {} iterations; first: {}", ag.problems.size(), ag.compared,
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

std::string number(double v, bool exact) { return exact ? hex(v) : fmt::format("{:.6g}", v); }

// The seed's DP=64 argument (suites/distributional.cpp has the same rule on Traces): per iteration and field,
// |mean A - mean B| is 0 or below the larger within-side range.
CompareRow spread_check(const std::vector<CompareRun>& runs) {
  CompareRow row;
  row.check = "grad norm, num zeros spread";
  const size_t na = count_runs(runs, 'A'), nb = count_runs(runs, 'B');
  if (na < 2 || nb < 2) {
    row.detail = fmt::format("not run: needs >= 2 runs per side (A {}, B {}); not a pass", na, nb);
    return row;
  }
  std::vector<std::string> compared;
  for (const ComparedField& f : fields_judged(FieldRule::kSpread)) {
    int64_t n = 0;
    std::set<int64_t> iterations;
    for (const RunEntry& e : runs.front().log.entries) iterations.insert(e.iteration);
    for (int64_t it : iterations) {
      struct Side {
        double sum = 0, lo = INFINITY, hi = -INFINITY;
        int count = 0;
        std::vector<std::string> shown;
      } a, b;
      bool everywhere = true, exact = true;
      for (const CompareRun& r : runs) {
        const RunEntry* e = r.log.find(it);
        if (!e || !(e->*f.value)) {
          everywhere = false;
          break;
        }
        const LoggedValue& v = *(e->*f.value);
        Side& s = r.side == 'A' ? a : b;
        s.sum += v.value;
        s.lo = std::min(s.lo, v.value);
        s.hi = std::max(s.hi, v.value);
        ++s.count;
        s.shown.push_back(shown(r, *e, v));
        exact = exact && v.exact;
      }
      if (!everywhere) continue;
      ++n;
      const double diff = std::fabs(a.sum / a.count - b.sum / b.count);
      const double spread = std::max(a.hi - a.lo, b.hi - b.lo);
      if (!(diff == 0.0 || diff < spread))
        row.problems.push_back(fmt::format("iteration {} {}: |mean A - mean B| = {} >= within-side spread {}: A {}; B {}",
                                           it, f.name, number(diff, exact), number(spread, exact), join(a.shown),
                                           join(b.shown)));
    }
    if (n > 0) compared.push_back(fmt::format("{} at {} iterations", f.name, n));
    else row.notes.push_back(fmt::format("{}: no iteration where every run logged it", f.name));
  }
  if (compared.empty()) {
    row.detail = "not run: no iteration where every run logged grad norm or num zeros";
    return row;
  }
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = row.problems.empty()
                   ? fmt::format("between-side mean difference 0 or below the within-side spread: {} ({} v {} runs)",
                                 join(compared), na, nb)
                   : fmt::format("{} violation(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

}  // namespace

std::vector<CompareRow> judged_rows(const std::vector<CompareRun>& runs, int64_t early) {
  return {early_identity(runs, early), learning_rate_identity(runs), nan_and_skipped(runs), spread_check(runs)};
}

}  // namespace loopgate
