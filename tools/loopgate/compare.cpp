// `loopgate compare --a A1 [A2 ...] --b B1 [B2 ...]`: did the change keep the numbers? The seed's correctness
// evidence (docs/design.md "The seed change") as verdict rows over real runs' files, nccl-tests style:
// header once, a row per check, a footer with the verdict; then every difference with iteration, file and both
// values (hexfloat for Traces). Rows: early lm loss / params norm identical; LR identical wherever both sides
// logged it; no NaN or skipped iteration; grad norm / num zeros between-side mean difference within the
// within-side spread; step time A/B (informational). docs/compare.md says what each proves and does not.
// Exit 0 every check that ran passed, 1 one failed, 2 bad input.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "fixtures/localize.h"
#include "tools/analysis/run_values.h"
#include "tools/loopgate/ab.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/compare_rows.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/error.h"

namespace loopgate {

// ---- declared in compare_rows.h: the step-time row and the output, shared with `loopgate pair` ----

StepTimeRow step_time_row(const std::vector<CompareRun>& runs, const StepTimeOptions& step, double alpha) {
  StepTimeRow out;
  out.row.check = "step time A/B";
  try {
    std::vector<AbSamples> a, b;
    for (const CompareRun& r : runs)
      (r.side == 'A' ? a : b).push_back(step_time_samples(r.log, step, std::string(1, r.side)));
    out.a = pool_samples(a, "A");
    out.b = pool_samples(b, "B");
    if (out.a.samples.size() < 2 || out.b.samples.size() < 2) {
      out.row.detail = fmt::format("not run: step-time windows after warm-up: A {}, B {}; needs >= 2 per side",
                                   out.a.samples.size(), out.b.samples.size());
      return out;
    }
    out.stats = ab_statistics(out.a.samples, out.b.samples, alpha);
    out.verdict = step_time_verdict(run_medians(a), run_medians(b), alpha);
  } catch (const InputError& e) {
    out.row.detail = fmt::format("not run: {}", e.what());
    return out;
  }
  out.ran = true;
  out.row.result = CompareResult::kInfo;
  out.row.detail = out.verdict.sentence;
  return out;
}

// ---- output ----

void print_compare_table(const std::vector<CompareRow>& rows, bool ok) {
  const std::string head = fmt::format("{:<30} {:<8} {}", "check", "result", "detail");
  const std::string rule(100, '-');
  std::printf("\n%s\n%s\n", head.c_str(), rule.c_str());
  for (const CompareRow& r : rows) std::printf("%-30s %-8s %s\n", r.check.c_str(), compare_result_name(r.result), r.detail.c_str());
  std::printf("%s\n", rule.c_str());
  int run = 0, passed = 0, failed = 0, not_run = 0, info = 0;
  for (const CompareRow& r : rows) {
    run += r.result == CompareResult::kPass || r.result == CompareResult::kFail;
    passed += r.result == CompareResult::kPass;
    failed += r.result == CompareResult::kFail;
    not_run += r.result == CompareResult::kNotRun;
    info += r.result == CompareResult::kInfo;
  }
  std::printf("checks run %d: passed %d, failed %d; not run %d; informational %d: %s\n", run, passed, failed, not_run,
              info, ok ? "OK" : "FAILED");
}

void print_compare_problems(const std::vector<CompareRow>& rows) {
  constexpr size_t kShown = 10;
  for (const CompareRow& r : rows) {
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

nlohmann::json compare_rows_json(const std::vector<CompareRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const CompareRow& r : rows)
    j.push_back({{"check", r.check}, {"result", compare_result_name(r.result)}, {"detail", r.detail},
                 {"problems", r.problems}, {"notes", r.notes}});
  return j;
}

namespace {

// Two Traces taken with --digests (one a side): where they part, as one line; "" otherwise.
std::string first_divergence_line(const CompareOptions& o, const std::vector<CompareRun>& runs) {
  if (runs.size() != 2 || runs[0].log.kind != RunKind::kTrace || runs[1].log.kind != RunKind::kTrace) return "";
  const Trace a = read_trace(o.a.front()), b = read_trace(o.b.front());
  auto has = [](const Trace& t) {
    return std::any_of(t.records.begin(), t.records.end(), [](const IterationRecord& r) { return !r.digests.empty(); });
  };
  if (!has(a) || !has(b)) return "";
  const std::optional<Divergence> d = first_divergence(a, b);
  return d ? d->describe() : "none (every compared digest matches)";
}

}  // namespace

int cmd_compare(const CompareOptions& o) {
  validate_compare_options(o);  // every flag, every file readable, --json writable (validate.h)
  if (stop_after_validation()) return 0;
  std::unique_ptr<std::ofstream> json = open_json_output(o.json_path);
  std::vector<CompareRun> runs;
  for (const std::string& p : o.a) runs.push_back({'A', read_any_run(p)});
  for (const std::string& p : o.b) runs.push_back({'B', read_any_run(p)});

  std::printf("loopgate compare: A = %zu run(s), B = %zu run(s); early iterations 1-%lld\n", o.a.size(), o.b.size(),
              static_cast<long long>(o.early));
  for (const CompareRun& r : runs)
    std::printf("  %c: %s (%s, %zu logged iterations)\n", r.side, r.log.path.c_str(), run_kind_name(r.log.kind),
                r.log.entries.size());
  StepTimeRow st = step_time_row(runs, o.step, o.alpha);
  std::vector<CompareRow> rows = judged_rows(runs, o.early);
  rows.push_back(st.row);
  const bool ok = std::none_of(rows.begin(), rows.end(), [](const CompareRow& r) { return r.result == CompareResult::kFail; });
  print_compare_table(rows, ok);
  print_compare_problems(rows);
  const std::string divergence = first_divergence_line(o, runs);
  if (!divergence.empty()) std::printf("\nfirst divergence (digests): %s\n", divergence.c_str());
  if (st.ran) {
    std::printf("\nstep time (informational, does not fail the comparison):\n");
    print_ab_report(stdout, st.a, st.b, st.stats, /*descriptive=*/true);
    std::printf("verdict (runs as units): %s\n", st.verdict.sentence.c_str());
  }
  if (json) {
    nlohmann::json j = {{"verdict", ok ? "pass" : "fail"}, {"a", o.a}, {"b", o.b}, {"early", o.early},
                        {"rows", compare_rows_json(rows)}};
    if (st.ran) {
      j["step_time"] = ab_report_json(st.a, st.b, st.stats);
      j["step_time"]["verdict"] = {{"kind", step_time_verdict_name(st.verdict.kind)}, {"sentence", st.verdict.sentence}};
    }
    if (!divergence.empty()) j["first_divergence"] = divergence;
    *json << j.dump(1) << "\n";
  }
  return ok ? 0 : 1;
}

CLI::App* add_compare_command(CLI::App& app, CompareOptions& cmp) {
  CLI::App* compare = app.add_subcommand("compare", "did the change keep the numbers: verdict rows over runs of A and B");
  compare->add_option("--a", cmp.a, "runs of A (baseline): Megatron logs, Traces or golden values")->required()->expected(1, -1);
  compare->add_option("--b", cmp.b, "runs of B (candidate)")->required()->expected(1, -1);
  compare->add_option("--early", cmp.early, "lm loss and params norm identical at iterations 1..K, K >= 1 (default 2)");
  add_step_time_flags(compare, cmp.json_path, cmp.alpha, cmp.step);
  return compare;
}

}  // namespace loopgate
