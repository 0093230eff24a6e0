// `loopgate compare --a A1 [A2 ...] --b B1 [B2 ...]`: did the change keep the numbers? The seed's correctness
// evidence (docs/design.md "The seed change") as verdict rows over real runs' files, nccl-tests style:
// header once, a row per check, a footer with the verdict; then every difference with iteration, file and both
// values (hexfloat for Traces). Rows: early lm loss / params norm identical; LR identical wherever both sides
// logged it; no NaN or skipped iteration; grad norm / num zeros between-side mean difference within the
// within-side spread; step time A/B (informational). docs/compare.md says what each proves and does not.
// Exit 0 every check that ran passed, 1 one failed, 2 bad input.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "tools/loopgate/ab.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

enum class Result { kPass, kFail, kNotRun, kInfo };
const char* result_name(Result r) {
  switch (r) {
    case Result::kPass: return "PASS";
    case Result::kFail: return "FAIL";
    case Result::kNotRun: return "NOT RUN";
    case Result::kInfo: return "INFO";
  }
  return "?";
}

struct Row {
  std::string check;
  Result result = Result::kNotRun;
  std::string detail;
  std::vector<std::string> problems;  // one line each: what differs, where, both values
  std::vector<std::string> notes;     // what was not compared and why
};

struct Run {
  char side;  // 'A' or 'B'
  RunLog log;
};

struct NamedField {
  const char* name;
  std::optional<LoggedValue> RunEntry::*field;
};

std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string shown(const Run& r, const RunEntry& e, const LoggedValue& v) {
  return fmt::format("{} '{}'", r.log.where(e), v.text);
}

// Identity of one field at one iteration across every run that logged it (compared with the first such run).
// Returns false (nothing compared) unless both sides logged it.
struct Agreement {
  int64_t compared = 0;
  std::set<std::string> formats;
  std::vector<std::string> problems, unlogged;
};

bool agree_at(const std::vector<Run>& runs, int64_t it, const NamedField& f, Agreement& out) {
  bool has_a = false, has_b = false;
  std::vector<std::string> missing;
  for (const Run& r : runs) {
    const RunEntry* e = r.log.find(it);
    if (!e || !(e->*f.field)) {
      missing.push_back(r.log.path);
      continue;
    }
    (r.side == 'A' ? has_a : has_b) = true;
  }
  if (!has_a || !has_b) return false;
  const Run* ref_run = nullptr;
  const RunEntry* ref_entry = nullptr;
  for (const Run& r : runs) {
    const RunEntry* e = r.log.find(it);
    if (!e || !(e->*f.field)) continue;
    const LoggedValue& v = *(e->*f.field);
    out.formats.insert(fmt::format("{} {}", f.name, printed_format(v)));
    if (!ref_run) {
      ref_run = &r;
      ref_entry = e;
      continue;
    }
    const LoggedValue& ref = *(ref_entry->*f.field);
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

size_t count_runs(const std::vector<Run>& runs, char side) {
  return static_cast<size_t>(std::count_if(runs.begin(), runs.end(), [&](const Run& r) { return r.side == side; }));
}

// ---- the rows ----

Row early_identity(const std::vector<Run>& runs, int64_t k) {
  Row row;
  row.check = fmt::format("lm loss, params norm @ 1-{}", k);
  Agreement ag;
  std::set<int64_t> iterations;
  for (int64_t it = 1; it <= k; ++it)
    for (const NamedField& f : {NamedField{"lm loss", &RunEntry::lm_loss}, NamedField{"params norm", &RunEntry::params_norm}})
      if (agree_at(runs, it, f, ag)) iterations.insert(it);
  row.notes = ag.unlogged;
  if (ag.compared == 0) {
    row.detail = fmt::format("no iteration in 1-{} where both sides logged lm loss or params norm", k);
    return row;
  }
  std::vector<std::string> its;
  for (int64_t it : iterations) its.push_back(std::to_string(it));
  row.problems = ag.problems;
  row.result = ag.problems.empty() ? Result::kPass : Result::kFail;
  row.detail = ag.problems.empty()
                   ? fmt::format("{} at iteration(s) {} in {} runs", identity_words(ag.formats), join(its), runs.size())
                   : fmt::format("{} difference(s); first: {}", ag.problems.size(), ag.problems.front());
  if (!ag.unlogged.empty()) row.detail += fmt::format(" ({} value(s) not logged, see notes)", ag.unlogged.size());
  return row;
}

Row learning_rate_identity(const std::vector<Run>& runs) {
  Row row;
  row.check = "learning rate";
  std::set<int64_t> iterations;
  for (const Run& r : runs)
    for (const RunEntry& e : r.log.entries) iterations.insert(e.iteration);
  Agreement ag;
  for (int64_t it : iterations) agree_at(runs, it, NamedField{"learning rate", &RunEntry::learning_rate}, ag);
  if (ag.compared == 0) {
    row.detail = "no iteration where both sides logged the learning rate";
    return row;
  }
  row.problems = ag.problems;
  row.result = ag.problems.empty() ? Result::kPass : Result::kFail;
  row.detail = ag.problems.empty()
                   ? fmt::format("{} at {} iterations logged by both sides ({} runs)", identity_words(ag.formats),
                                 ag.compared, runs.size())
                   : fmt::format("{} difference(s) over {} iterations; first: {}", ag.problems.size(), ag.compared,
                                 ag.problems.front());
  return row;
}

Row nan_and_skipped(const std::vector<Run>& runs) {
  Row row;
  row.check = "nan / skipped iterations";
  int64_t entries = 0;
  for (const Run& r : runs) {
    bool counters = false;
    for (const RunEntry& e : r.log.entries) {
      ++entries;
      const std::string at = r.log.kind == RunKind::kMegatronLog
                                 ? fmt::format("{}: iteration {}", r.log.where(e), e.iteration)
                                 : r.log.where(e);
      counters = counters || e.nan_iterations || e.skipped_iterations;
      if (e.nan_iterations && *e.nan_iterations > 0)
        row.problems.push_back(fmt::format("{}: number of nan iterations: {}", at, *e.nan_iterations));
      for (const NamedField& f : {NamedField{"lm loss", &RunEntry::lm_loss}, NamedField{"grad norm", &RunEntry::grad_norm},
                                  NamedField{"params norm", &RunEntry::params_norm}})
        if (e.*f.field && !std::isfinite((e.*f.field)->value))
          row.problems.push_back(fmt::format("{}: {}: {}", at, f.name, (e.*f.field)->text));
      if (e.skipped_iterations && *e.skipped_iterations > 0)
        row.problems.push_back(fmt::format("{}: number of skipped iterations: {}", at, *e.skipped_iterations));
    }
    if (!counters)
      row.notes.push_back(fmt::format("{}: no skipped / nan counters ({}): values checked for NaN only", r.log.path,
                                      run_kind_name(r.log.kind)));
  }
  row.result = row.problems.empty() ? Result::kPass : Result::kFail;
  row.detail = row.problems.empty()
                   ? fmt::format("0 NaN, 0 skipped iterations in {} runs ({} logged iterations)", runs.size(), entries)
                   : fmt::format("{} problem(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

std::string number(double v, bool exact) { return exact ? hex(v) : fmt::format("{:.6g}", v); }

// The seed's DP=64 argument (suites/distributional.cpp has the same rule on Traces): per iteration and field,
// |mean A - mean B| is 0 or below the larger within-side range.
Row spread_check(const std::vector<Run>& runs) {
  Row row;
  row.check = "grad norm, num zeros spread";
  const size_t na = count_runs(runs, 'A'), nb = count_runs(runs, 'B');
  if (na < 2 || nb < 2) {
    row.detail = fmt::format("not run: needs >= 2 runs per side (A {}, B {}); not a pass", na, nb);
    return row;
  }
  std::vector<std::string> compared;
  for (const NamedField& f : {NamedField{"grad norm", &RunEntry::grad_norm}, NamedField{"num zeros", &RunEntry::num_zeros}}) {
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
      for (const Run& r : runs) {
        const RunEntry* e = r.log.find(it);
        if (!e || !(e->*f.field)) {
          everywhere = false;
          break;
        }
        const LoggedValue& v = *(e->*f.field);
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
  row.result = row.problems.empty() ? Result::kPass : Result::kFail;
  row.detail = row.problems.empty()
                   ? fmt::format("between-side mean difference 0 or below the within-side spread: {} ({} v {} runs)",
                                 join(compared), na, nb)
                   : fmt::format("{} violation(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

struct StepTimeRow {
  Row row;
  bool ran = false;
  AbSamples a, b;
  AbStats stats;
};

StepTimeRow step_time(const std::vector<Run>& runs, const CompareOptions& o) {
  StepTimeRow out;
  out.row.check = "step time A/B";
  try {
    std::vector<AbSamples> a, b;
    for (const Run& r : runs)
      (r.side == 'A' ? a : b).push_back(step_time_samples(r.log, o.step, std::string(1, r.side)));
    out.a = pool_samples(a, "A");
    out.b = pool_samples(b, "B");
    if (out.a.samples.size() < 2 || out.b.samples.size() < 2) {
      out.row.detail = fmt::format("not run: step-time windows after warm-up: A {}, B {}; needs >= 2 per side",
                                   out.a.samples.size(), out.b.samples.size());
      return out;
    }
    out.stats = ab_statistics(out.a.samples, out.b.samples, o.alpha);
  } catch (const InputError& e) {
    out.row.detail = fmt::format("not run: {}", e.what());
    return out;
  }
  out.ran = true;
  out.row.result = Result::kInfo;
  out.row.detail = out.stats.sentence;
  return out;
}

// ---- output ----

void print_table(const std::vector<Row>& rows, bool ok) {
  const std::string head = fmt::format("{:<30} {:<8} {}", "check", "result", "detail");
  const std::string rule(100, '-');
  std::printf("\n%s\n%s\n", head.c_str(), rule.c_str());
  for (const Row& r : rows) std::printf("%-30s %-8s %s\n", r.check.c_str(), result_name(r.result), r.detail.c_str());
  std::printf("%s\n", rule.c_str());
  int run = 0, passed = 0, failed = 0, not_run = 0, info = 0;
  for (const Row& r : rows) {
    run += r.result == Result::kPass || r.result == Result::kFail;
    passed += r.result == Result::kPass;
    failed += r.result == Result::kFail;
    not_run += r.result == Result::kNotRun;
    info += r.result == Result::kInfo;
  }
  std::printf("checks run %d: passed %d, failed %d; not run %d; informational %d: %s\n", run, passed, failed, not_run,
              info, ok ? "OK" : "FAILED");
}

void print_problems(const std::vector<Row>& rows) {
  constexpr size_t kShown = 10;
  for (const Row& r : rows) {
    if (!r.problems.empty()) {
      std::printf("\nFAILED %s (%zu):\n", r.check.c_str(), r.problems.size());
      for (size_t i = 0; i < std::min(kShown, r.problems.size()); ++i) std::printf("  %s\n", r.problems[i].c_str());
      if (r.problems.size() > kShown) std::printf("  ... and %zu more\n", r.problems.size() - kShown);
    }
    if (!r.notes.empty()) {
      std::printf("\nnotes, %s:\n", r.check.c_str());
      for (const std::string& n : r.notes) std::printf("  %s\n", n.c_str());
    }
  }
}

nlohmann::json rows_json(const std::vector<Row>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const Row& r : rows)
    j.push_back({{"check", r.check}, {"result", result_name(r.result)}, {"detail", r.detail},
                 {"problems", r.problems}, {"notes", r.notes}});
  return j;
}

}  // namespace

int cmd_compare(const CompareOptions& o) {
  validate_compare_options(o);  // every flag, every file readable, --json writable (validate.h)
  std::unique_ptr<std::ofstream> json = open_json_output(o.json_path);
  std::vector<Run> runs;
  for (const std::string& p : o.a) runs.push_back({'A', read_run(p)});
  for (const std::string& p : o.b) runs.push_back({'B', read_run(p)});

  std::printf("loopgate compare: A = %zu run(s), B = %zu run(s); early iterations 1-%lld\n", o.a.size(), o.b.size(),
              static_cast<long long>(o.early));
  for (const Run& r : runs)
    std::printf("  %c: %s (%s, %zu logged iterations)\n", r.side, r.log.path.c_str(), run_kind_name(r.log.kind),
                r.log.entries.size());
  StepTimeRow st = step_time(runs, o);
  std::vector<Row> rows = {early_identity(runs, o.early), learning_rate_identity(runs), nan_and_skipped(runs),
                           spread_check(runs), st.row};
  const bool ok = std::none_of(rows.begin(), rows.end(), [](const Row& r) { return r.result == Result::kFail; });
  print_table(rows, ok);
  print_problems(rows);
  if (st.ran) {
    std::printf("\nstep time (informational, does not fail the comparison):\n");
    print_ab_report(stdout, st.a, st.b, st.stats);
  }
  if (json) {
    nlohmann::json j = {{"verdict", ok ? "pass" : "fail"}, {"a", o.a}, {"b", o.b}, {"early", o.early},
                        {"rows", rows_json(rows)}};
    if (st.ran) j["step_time"] = ab_report_json(st.a, st.b, st.stats);
    *json << j.dump(1) << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace loopgate
