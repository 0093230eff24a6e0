// `loopgate pair` (pair.h): runs two commands in alternating phases, then judges their logs and sync tables.
#include "tools/loopgate/pair.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "fixtures/faults/fault_spec.h"
#include "tools/analysis/run_values.h"
#include "tools/analysis/timer_accounting.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/compare_rows.h"
#include "tools/loopgate/paths.h"
#include "tools/loopgate/process.h"
#include "trainer/measure/sync_table_file.h"
#include "tools/loopgate/report.h"
#include "tools/loopgate/syncs.h"
#include "tools/loopgate/validate.h"
#include "tools/loopgate/verdicts.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace fs = std::filesystem;
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// One launch of one arm's command.
struct PairRun {
  std::string arm;  // "baseline" | "candidate"
  int index = 0;    // 1..runs; 0 for a NaN-injected run
  std::string nan_spec;  // the injected run's fault spec
  int nan_index = 0;     // which --nan-inject, 1-based; 0 when only one was given
  std::string restart;   // --resume-at's runs: "save" (saved at K, exits), "load" (loads its arm's), "load-other"
  std::string dir, log_path;
  int exit_code = 0;
  double seconds = 0;
  bool timed_out = false;
  std::optional<RunLog> log;  // unset when the log has no iteration line
  std::string unreadable;     // why not
  // Exact bits: the run's Trace (trace.json in its folder), or else the values the shim recorded (values.RANK.json:
  // the last rank's, the one that prints), with the log's elapsed times.
  std::optional<RunLog> exact;
  std::vector<RunValues> values;  // every rank's, when the shim recorded them
  const RunLog& numbers() const { return exact ? *exact : *log; }
  std::vector<nlohmann::json> tables;
  char side() const { return arm == "baseline" ? 'A' : 'B'; }
  std::string name() const {
    if (!restart.empty()) return arm + "-" + restart;
    if (index > 0) return fmt::format("{}-{}", arm, index);
    return nan_index > 0 ? fmt::format("{}-nan{}", arm, nan_index) : arm + "-nan";
  }
};

// NAME=REASON pairs (--allow-arg, --allow-sync): the reason is required, so the report says why.
std::map<std::string, std::string> declared(const std::vector<std::string>& specs, const char* flag) {
  std::map<std::string, std::string> out;
  for (const std::string& s : specs) {
    const size_t eq = s.find('=');
    LG_INPUT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < s.size(), "{} '{}': expected NAME=REASON", flag, s);
    out[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return out;
}

std::string shim_dir(const PairOptions& o) { return fs::path(o.inject_lib).parent_path().string() + "/loopgate_pyshim"; }

void check_pair_options(const PairOptions& o) {
  if (!o.rejudge.empty()) {
    check_input_file("--rejudge", o.rejudge);
    LG_INPUT_CHECK(fs::is_directory(o.out_dir), "--out-dir {}: --rejudge reads the runs kept there: no such folder",
                   o.out_dir);
  } else {
    LG_INPUT_CHECK(!o.baseline.empty(), "--baseline is required (the baseline's command line), unless --rejudge");
    LG_INPUT_CHECK(!o.candidate.empty(), "--candidate is required (the candidate's command line), unless --rejudge");
  }
  LG_INPUT_CHECK(o.runs >= 1 && o.runs <= 100, "--runs {}: must be 1..100", o.runs);
  LG_INPUT_CHECK(o.early >= 1, "--early {}: must be >= 1", o.early);
  LG_INPUT_CHECK(o.counter == "cupti" || o.counter == "off", "--counter '{}': must be cupti or off", o.counter);
  if (o.counter == "cupti") check_input_file("--inject-lib", o.inject_lib);
  if (o.counter == "cupti" || !o.nan_inject.empty() || o.values)
    check_input_file("--inject-lib (its Python shim)", shim_dir(o) + "/sitecustomize.py");
  LG_INPUT_CHECK(o.log_fn.find(':') != std::string::npos, "--log-fn '{}': expected module:function", o.log_fn);
  LG_INPUT_CHECK(o.resume_at >= 0, "--resume-at {}: must be >= 0 (0: off)", o.resume_at);
  LG_INPUT_CHECK(o.save_flags.find("{dir}") != std::string::npos, "--save-flags '{}': needs {{dir}}", o.save_flags);
  LG_INPUT_CHECK(o.load_flags.find("{dir}") != std::string::npos, "--load-flags '{}': needs {{dir}}", o.load_flags);
  LG_INPUT_CHECK(std::isfinite(o.timer_tolerance_ms) && o.timer_tolerance_ms >= 0,
                 "--timer-tolerance-ms {}: must be >= 0", o.timer_tolerance_ms);
  LG_INPUT_CHECK(std::isfinite(o.timer_tolerance) && o.timer_tolerance >= 0 && o.timer_tolerance < 1,
                 "--timer-tolerance {}: must be in [0, 1)", o.timer_tolerance);
  static const std::regex range(R"((\d{1,9})-(\d{1,9}))");
  std::smatch m;
  LG_INPUT_CHECK(o.iters.empty() || (std::regex_match(o.iters, m, range) && std::stoll(m[1]) >= 1 &&
                                     std::stoll(m[2]) >= std::stoll(m[1])),
                 "--iters '{}': expected A-B with 1 <= A <= B", o.iters);
  declared(o.allow_args, "--allow-arg");
  declared(o.allow_syncs, "--allow-sync");
  for (const std::string& spec : o.nan_inject) {
    try {
      parse_fault_specs(spec);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--nan-inject '{}': {}", spec, e.what()));
    }
  }
  LG_INPUT_CHECK(std::isfinite(o.run_timeout) && o.run_timeout >= 0, "--run-timeout {}: must be >= 0 seconds",
                 o.run_timeout);
  LG_INPUT_CHECK(o.alpha > 0 && o.alpha < 1, "--alpha {}: must be in (0, 1)", o.alpha);
  check_step_time_options(o.step);
  if (o.rejudge.empty()) check_output_dir("--out-dir", o.out_dir);
  if (!o.json_path.empty()) check_output_file("--json", o.json_path);
  if (!o.junit_path.empty()) check_output_file("--junit", o.junit_path);
  if (!o.html_path.empty()) check_output_file("--html", o.html_path);
  if (!o.sync_budget.empty()) check_input_file("--sync-budget", o.sync_budget);
}

// ---- running ----

// /bin/sh -c CMD with `env` added, stdout and stderr into the log, in its own process group (a timeout ends
// every process it started: mpirun, torchrun and their ranks).
void read_back(PairRun& r);

void launch(PairRun& r, const std::string& command, const Env& env, double timeout) {
  fs::create_directories(r.dir);
  for (const fs::directory_entry& e : fs::directory_iterator(r.dir)) fs::remove_all(e.path());
  const auto start = std::chrono::steady_clock::now();
  ProcessSpec spec;
  spec.shell = command;
  spec.env = env;
  spec.log_path = r.log_path;
  spec.own_group = true;
  r.exit_code = run_process(spec, timeout, &r.timed_out);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  read_back(r);
}

// What a run left in its folder: its log, its sync tables, its Trace.
void read_back(PairRun& r) {
  try {
    r.log = read_run(r.log_path);
  } catch (const InputError& e) {
    r.unreadable = e.what();
  }
  r.tables = read_sync_tables(r.dir);
  const std::string trace = r.dir + "/trace.json";
  try {
    if (fs::exists(trace)) r.exact = read_run(trace);
    r.values = read_values_folder(r.dir);
  } catch (const InputError& e) {
    r.unreadable = e.what();
    r.log.reset();
  }
  if (!r.exact && !r.values.empty() && r.log) {
    RunLog exact = r.values.back().exact;
    for (RunEntry& e : exact.entries)  // the step-time row reads the printed elapsed times
      if (const RunEntry* printed = r.log->find(e.iteration)) e.elapsed_ms = printed->elapsed_ms;
    exact.arguments = r.log->arguments;
    r.exact = std::move(exact);
  }
}

Env run_environment(const PairOptions& o, const PairRun& r, const std::string& nan_inject) {
  Env env = {{"LOOPGATE_PAIR_ARM", r.arm}, {"LOOPGATE_PAIR_RUN", r.name()}, {"LOOPGATE_PAIR_DIR", r.dir}};
  if (!nan_inject.empty()) env.emplace_back("LOOPGATE_NAN_INJECT", nan_inject);
  if (o.values) {  // the shim records the exact values (loopgate_values.py) into the run's folder
    env.emplace_back("LOOPGATE_VALUES_DIR", r.dir);
    env.emplace_back("LOOPGATE_VALUES_DIGEST_ITERS", std::to_string(o.early));
    env.emplace_back("LOOPGATE_VALUES_LOG_FN", o.log_fn);
  }
  if (o.counter == "cupti") {
    SyncsOptions so;
    so.iter_fn = o.iter_fn;
    so.iters = o.iters;
    so.inject_lib = o.inject_lib;
    for (auto& kv : counter_environment(so, r.dir)) env.push_back(std::move(kv));
  } else if (!nan_inject.empty() || o.values) {  // the shim, on PYTHONPATH, counter or not
    const char* pythonpath = std::getenv("PYTHONPATH");
    env.emplace_back("PYTHONPATH", fs::absolute(shim_dir(o)).string() +
                                       (pythonpath && *pythonpath ? std::string(":") + pythonpath : ""));
    env.emplace_back(sync_file::kEnvShimIterFn, o.iter_fn);
  }
  return env;
}

// Launches the run `r` names (its arm, index, fault or restart role): the arm's command, with `flags` appended (a
// restart run's --save-flags or --load-flags), in its own folder; prints one line.
PairRun launched(const PairOptions& o, PairRun r, const std::string& flags = "") {
  r.dir = fs::absolute(fs::path(o.out_dir) / r.name()).string();
  r.log_path = r.dir + "/log.txt";
  const std::string& command = r.arm == "baseline" ? o.baseline : o.candidate;
  launch(r, flags.empty() ? command : command + " " + flags, run_environment(o, r, r.nan_spec), o.run_timeout);
  std::printf("  %-*s exit %3d %8.1f s  %zu logged iteration(s)%s  %s\n", r.restart.empty() ? 14 : 18,
              r.name().c_str(), r.exit_code, r.seconds, r.log ? r.log->entries.size() : 0,
              r.timed_out ? " (timed out)" : "", r.log_path.c_str());
  std::fflush(stdout);
  return r;
}

PairRun run_one(const PairOptions& o, const std::string& arm, int index, const std::string& nan_inject = "",
                int nan_index = 0) {
  PairRun r;
  r.arm = arm;
  r.index = index;
  r.nan_spec = nan_inject;
  r.nan_index = nan_index;
  return launched(o, r);
}

// A restart run: the arm's command with the save or load flags appended (--save-flags, --load-flags).
PairRun run_restart(const PairOptions& o, const std::string& arm, const std::string& role, const std::string& flags) {
  PairRun r;
  r.arm = arm;
  r.restart = role;
  return launched(o, r, flags);
}

// The runs an earlier pair's --json lists (--rejudge), read back from --out-dir/NAME/ with their exit codes.
void kept_runs(PairOptions& o, std::vector<PairRun>* runs, std::vector<PairRun>* nan_runs,
               std::vector<PairRun>* restart_runs) {
  const nlohmann::json j = read_json_file("--rejudge", o.rejudge);
  LG_INPUT_CHECK(j.contains("pair") && j["pair"].contains("runs") && j["pair"]["runs"].is_array(),
                 "--rejudge {}: not a loopgate pair --json (no pair.runs)", o.rejudge);
  o.baseline = j["pair"].value("baseline", "");
  o.candidate = j["pair"].value("candidate", "");
  static const std::regex name(R"((baseline|candidate)-(\d+|nan(\d*)|save|load|load-other))");
  for (const nlohmann::json& e : j["pair"]["runs"]) {
    const std::string run = e.value("run", "");
    std::smatch m;
    LG_INPUT_CHECK(std::regex_match(run, m, name), "--rejudge {}: run '{}' is not ARM-N, ARM-nan[K] or a restart run",
                   o.rejudge, run);
    PairRun r;
    r.arm = m[1];
    const bool injected = m[2].str().rfind("nan", 0) == 0;
    const bool restart = !injected && !std::isdigit(static_cast<unsigned char>(m[2].str()[0]));
    if (restart) {
      LG_INPUT_CHECK(o.resume_at > 0, "--rejudge {}: run {} is a restart run: give its --resume-at", o.rejudge, run);
      r.restart = m[2];
    }
    r.index = injected || restart ? 0 : std::stoi(m[2]);
    r.nan_index = injected && !m[3].str().empty() ? std::stoi(m[3]) : 0;
    if (injected) {
      const size_t k = r.nan_index > 0 ? static_cast<size_t>(r.nan_index - 1) : 0;
      LG_INPUT_CHECK(k < o.nan_inject.size(), "--rejudge {}: run {} was injected: give its --nan-inject spec (in order)",
                     o.rejudge, run);
      r.nan_spec = o.nan_inject[k];
    }
    r.dir = fs::absolute(fs::path(o.out_dir) / run).string();
    r.log_path = r.dir + "/log.txt";
    r.exit_code = e.value("exit_code", -1);
    r.seconds = e.value("seconds", 0.0);
    check_input_file("--rejudge (a kept run's log)", r.log_path);
    read_back(r);
    (injected ? nan_runs : restart ? restart_runs : runs)->push_back(std::move(r));
  }
}

// ---- the rows ----

CompareRow completed_row(const std::vector<PairRun>& runs) {
  CompareRow row;
  row.check = "runs completed";
  for (const PairRun& r : runs) {
    if (r.exit_code != 0)
      row.problems.push_back(fmt::format("{}: exit {}{}, see {}", r.name(), r.exit_code,
                                         r.timed_out ? " (timed out)" : "", r.log_path));
    if (!r.log) row.problems.push_back(fmt::format("{}: {}", r.name(), r.unreadable));
  }
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = row.problems.empty() ? fmt::format("{} runs, each exit 0 with a log", runs.size())
                                    : fmt::format("{} problem(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

CompareRow arguments_row(const std::vector<PairRun>& runs, const std::map<std::string, std::string>& allowed) {
  CompareRow row;
  row.check = "resolved arguments";
  const PairRun* ref = nullptr;
  std::set<std::string> allowed_seen;
  for (const PairRun& r : runs) {
    if (!r.log) continue;
    if (!r.log->arguments) {
      row.problems.push_back(fmt::format("{}: no arguments block in {}", r.name(), r.log_path));
      continue;
    }
    if (!ref) {
      ref = &r;
      continue;
    }
    const auto &a = *ref->log->arguments, &b = *r.log->arguments;
    std::set<std::string> names;
    for (const auto& [k, v] : a) names.insert(k);
    for (const auto& [k, v] : b) names.insert(k);
    for (const std::string& k : names) {
      const auto ia = a.find(k), ib = b.find(k);
      const std::string va = ia == a.end() ? "(absent)" : ia->second, vb = ib == b.end() ? "(absent)" : ib->second;
      if (va == vb) continue;
      if (allowed.count(k)) {
        allowed_seen.insert(k);
        continue;
      }
      row.problems.push_back(fmt::format("{}: {} vs {}: '{}' vs '{}'", k, ref->name(), r.name(), va, vb));
    }
  }
  for (const std::string& k : allowed_seen) row.notes.push_back(fmt::format("{} differs, declared: {}", k, allowed.at(k)));
  if (!ref) {
    row.result = CompareResult::kFail;
    row.detail = "no run printed an arguments block";
    return row;
  }
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = row.problems.empty()
                   ? fmt::format("{} arguments identical in every run{}", ref->log->arguments->size(),
                                 allowed_seen.empty() ? "" : fmt::format(" but {} declared", allowed_seen.size()))
                   : fmt::format("{} difference(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

// Whether `r` shows the injected fault detected: a NaN or skipped iteration counted, or the run ended non-zero.
bool detected(const PairRun& r) {
  if (r.exit_code != 0) return true;
  if (!r.log) return false;
  for (const RunEntry& e : r.log->entries)
    if (e.nan_iterations.value_or(0) > 0 || e.skipped_iterations.value_or(0) > 0) return true;
  return false;
}

// What the row compares between the two injected runs: every logged iteration's values and counters.
std::string entry_text(const RunEntry& e) {
  auto v = [](const std::optional<LoggedValue>& x) { return x ? x->text : std::string("-"); };
  auto c = [](const std::optional<int64_t>& x) { return x ? std::to_string(*x) : std::string("-"); };
  return fmt::format("lm loss {} | params norm {} | grad norm {} | skipped {} | nan {}", v(e.lm_loss), v(e.params_norm),
                     v(e.grad_norm), c(e.skipped_iterations), c(e.nan_iterations));
}

// One spec's two injected runs (baseline, candidate): the problems, and the detail when there are none.
std::string judge_injected_pair(const PairRun& a, const PairRun& b, std::vector<std::string>* problems) {
  const size_t before = problems->size();
  auto problem = [&](const std::string& p) {
    problems->push_back(a.nan_index > 0 ? fmt::format("'{}': {}", a.nan_spec, p) : p);
  };
  for (const PairRun* r : {&a, &b}) {
    if (!detected(*r))
      problem(fmt::format("{}: '{}' injected, not detected: exit 0 and no NaN or skipped iteration ({})", r->name(),
                          r->nan_spec, r->log_path));
    if (r->log)
      for (const RunEntry& e : r->log->entries)
        if (e.params_norm && !std::isfinite(e.params_norm->value))
          problem(fmt::format("{}: params norm {} at iteration {}: the step took the NaN ({})", r->name(),
                              e.params_norm->text, e.iteration, r->log->where(e)));
  }
  if (a.exit_code != b.exit_code) problem(fmt::format("exit {} (baseline) vs {} (candidate)", a.exit_code, b.exit_code));
  std::set<int64_t> its;
  for (const PairRun* r : {&a, &b})
    if (r->log)
      for (const RunEntry& e : r->log->entries) its.insert(e.iteration);
  for (int64_t it : its) {
    const RunEntry* ea = a.log ? a.log->find(it) : nullptr;
    const RunEntry* eb = b.log ? b.log->find(it) : nullptr;
    const std::string ta = ea ? entry_text(*ea) : "(not logged)", tb = eb ? entry_text(*eb) : "(not logged)";
    if (ta != tb) problem(fmt::format("iteration {}: baseline {}; candidate {}", it, ta, tb));
  }
  int64_t skipped = 0, nan = 0;
  if (a.log)
    for (const RunEntry& e : a.log->entries) {
      skipped += e.skipped_iterations.value_or(0);
      nan += e.nan_iterations.value_or(0);
    }
  if (problems->size() > before) return "";
  return fmt::format("'{}' detected alike in both arms: exit {}, {} NaN and {} skipped iteration(s), {} logged "
                     "iterations identical", a.nan_spec, a.exit_code, nan, skipped, its.size());
}

CompareRow nan_row(const std::vector<PairRun>& nan_runs) {
  CompareRow row;
  row.check = "NaN before the step";
  if (nan_runs.empty()) {
    row.detail = "not run: no --nan-inject (the injected runs prove detection before optimizer.step)";
    return row;
  }
  std::vector<std::string> alike;
  for (size_t i = 0; i + 1 < nan_runs.size(); i += 2) alike.push_back(judge_injected_pair(nan_runs[i], nan_runs[i + 1], &row.problems));
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = row.problems.empty() ? fmt::format("{}", fmt::join(alike, "; "))
                                    : fmt::format("{} problem(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

// A site without its line number ("file:LINE function" -> "file function"): the candidate's patch moves lines.
std::string site_key(const std::string& site) {
  static const std::regex line(R"(:\d+( |$))");
  return std::regex_replace(site, line, "$1");
}

using SyncBudget = std::map<std::pair<std::string, std::string>, double>;  // (site without line, kind) -> per iteration

// A declared budget (--sync-budget): a loopgate syncs table's syncs per iteration per site.
SyncBudget table_budget(const nlohmann::json& table, const std::string& name) {
  SyncBudget out;
  for (const SyncSiteRow& s : sync_site_rows(table, name)) out[{site_key(s.site), s.kind}] += s.per_iteration;
  return out;
}

// Syncs per iteration per (site without line, kind), mean over an arm's runs.
SyncBudget arm_syncs(const std::vector<PairRun>& runs, char side) {
  SyncBudget out;
  int n = 0;
  for (const PairRun& r : runs) {
    if (r.side() != side || r.tables.empty()) continue;
    ++n;
    const nlohmann::json merged = {{"processes", r.tables}};
    for (const SyncSiteRow& s : sync_site_rows(merged, r.dir)) out[{site_key(s.site), s.kind}] += s.per_iteration;
  }
  for (auto& [k, v] : out) v /= n;
  return out;
}

// The sites of each (site without line, kind) in an arm's tables, with their lines: what a problem names.
std::map<std::pair<std::string, std::string>, std::set<std::string>> arm_sites(const std::vector<PairRun>& runs,
                                                                               char side) {
  std::map<std::pair<std::string, std::string>, std::set<std::string>> out;
  for (const PairRun& r : runs) {
    if (r.side() != side || r.tables.empty()) continue;
    const nlohmann::json merged = {{"processes", r.tables}};
    for (const SyncSiteRow& s : sync_site_rows(merged, r.dir)) out[{site_key(s.site), s.kind}].insert(s.site);
  }
  return out;
}

struct SyncsRow {
  CompareRow row;
  std::vector<SyncSiteRow> a, b;  // per arm, for the printed table
};

// Each site's candidate syncs against the budget: the baseline's, or the declared one (`declared`, named `name`).
SyncsRow syncs_row(const std::vector<PairRun>& runs, const std::map<std::string, std::string>& allowed,
                   const SyncBudget* declared, const std::string& name) {
  SyncsRow out;
  CompareRow& row = out.row;
  row.check = "syncs per iteration";
  size_t with = 0;
  for (const PairRun& r : runs) {
    if (!r.tables.empty()) ++with;
    else row.problems.push_back(fmt::format("{}: no sync table in {}", r.name(), r.dir));
  }
  if (with == 0) {
    row.problems.clear();
    row.detail = "not run: no run wrote a sync table (--counter off, and the commands wrote none)";
    return out;
  }
  const SyncBudget a = arm_syncs(runs, 'A'), b = arm_syncs(runs, 'B');
  const auto lines = arm_sites(runs, 'B');
  const SyncBudget& limit = declared ? *declared : a;
  const std::string whose = declared ? "the budget in " + name : "the baseline's";
  std::set<std::pair<std::string, std::string>> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  for (const auto& [k, v] : limit) keys.insert(k);
  double ta = 0, tb = 0, tl = 0;
  for (const auto& k : keys) {
    const double va = a.count(k) ? a.at(k) : 0, vb = b.count(k) ? b.at(k) : 0, vl = limit.count(k) ? limit.at(k) : 0;
    ta += va;
    tb += vb;
    tl += vl;
    out.a.push_back({k.first, k.second, va, 0});
    out.b.push_back({k.first, k.second, vb, 0});
    if (vb <= vl + 1e-9) continue;
    const auto allow = std::find_if(allowed.begin(), allowed.end(),
                                    [&](const auto& p) { return k.first.find(p.first) != std::string::npos; });
    if (allow != allowed.end()) {
      row.notes.push_back(fmt::format("{} ({}): {:.2f} -> {:.2f} per iteration, declared: {}", k.first, k.second, vl, vb,
                                      allow->second));
      continue;
    }
    std::string at;  // the candidate's lines, where the site has them
    if (lines.count(k) && *lines.at(k).begin() != k.first) at = fmt::format("; at {}", fmt::join(lines.at(k), ", "));
    row.problems.push_back(fmt::format("{} ({}): {:.2f} -> {:.2f} per iteration, over {}{}", k.first, k.second, vl, vb,
                                       declared ? whose : "the baseline's budget", at));
  }
  if (tb > tl + 1e-9)
    row.problems.push_back(fmt::format("total: {:.2f} -> {:.2f} per iteration, over {}", tl, tb, whose));
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = row.problems.empty()
                   ? fmt::format("{:.2f} -> {:.2f} per iteration ({:+.2f}); no site over {}{}", ta, tb, tb - ta, whose,
                                 row.notes.empty() ? "" : fmt::format(", {} declared", row.notes.size()))
                   : fmt::format("{:.2f} -> {:.2f} per iteration; {} problem(s); first: {}", ta, tb, row.problems.size(),
                                 row.problems.front());
  return out;
}

// The parameter digests (the shim's, per rank: a bitwise hash of every parameter and optimizer tensor after steps
// 1..--early and at exit). Held to identity in every run, unless the baseline's own runs part (a nondeterministic
// configuration): then the row says where and judges nothing.
CompareRow digest_row(const std::vector<PairRun>& runs) {
  CompareRow row;
  row.check = "parameter digest";
  const PairRun* ref = nullptr;
  size_t with = 0;
  for (const PairRun& r : runs)
    if (!r.values.empty() && !r.values.front().digests.empty()) {
      ++with;
      if (!ref || (ref->side() != 'A' && r.side() == 'A')) ref = &r;
    }
  if (with == 0) {
    row.detail = "not run: no run recorded digests (the shim's values: a Python program, --values on)";
    return row;
  }
  auto part = [&](const PairRun& r) -> std::optional<std::string> {
    if (r.values.size() != ref->values.size())
      return fmt::format("{} recorded {} rank(s), {} {}", r.name(), r.values.size(), ref->name(), ref->values.size());
    for (size_t k = 0; k < r.values.size(); ++k)
      if (auto p = first_parting(ref->values[k].digests, r.values[k].digests))
        return fmt::format("{} parts from {} after step {} on rank {}: first at {} ({} tensor(s) differ there)",
                           r.name(), ref->name(), p->step, r.values[k].rank, p->tensor, p->differing);
    return std::nullopt;
  };
  for (const PairRun& r : runs)
    if (&r != ref && r.side() == 'A' && !r.values.empty())
      if (auto p = part(r)) {
        row.result = CompareResult::kInfo;
        row.detail = fmt::format("not judged: the baseline's own runs part (a nondeterministic configuration): {}", *p);
        return row;
      }
  size_t tensors = 0;
  std::set<std::string> steps;
  for (const StepDigest& d : ref->values.front().digests) {
    steps.insert(d.step);
    tensors = std::max(tensors, d.tensors.size());
  }
  for (const PairRun& r : runs) {
    if (&r == ref) continue;
    if (r.values.empty() || r.values.front().digests.empty()) {
      row.problems.push_back(fmt::format("{}: no digests in {}", r.name(), r.dir));
      continue;
    }
    if (auto p = part(r)) row.problems.push_back(*p);
  }
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = row.problems.empty()
                   ? fmt::format("bit-identical: {} tensors on {} rank(s) after step(s) {} in {} runs", tensors,
                                 ref->values.size(), fmt::join(steps, ", "), with)
                   : fmt::format("{} problem(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

// Every interval reported once and in order (timer_accounting.h): each run's printed windows against the shim's
// clock of the rank that printed.
CompareRow timer_row(const std::vector<PairRun>& runs, const TimerTolerance& tol) {
  CompareRow row;
  row.check = "timer accounting";
  int64_t windows = 0, judged = 0;
  double worst_ms = 0, worst_share = 0;
  std::set<int> lags;
  for (const PairRun& r : runs) {
    if (!r.log || r.values.empty()) continue;
    const TimerAccounting t = judge_timer(*r.log, r.values.back().calls, tol);
    if (t.compared == 0) {
      row.notes.push_back(fmt::format("{}: no window between two log points that reset the timer", r.name()));
      continue;
    }
    ++judged;
    windows += t.compared;
    lags.insert(t.lag);
    worst_ms = std::max(worst_ms, t.worst_ms);
    worst_share = std::max(worst_share, t.worst_share);
    for (const std::string& p : t.problems) row.problems.push_back(fmt::format("{}: {}", r.name(), p));
  }
  if (judged == 0) {
    row.detail = "not run: no run with both a log's elapsed times and the shim's clock (--values on, a Python program)";
    return row;
  }
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  const std::string lag = lags.size() == 1 ? fmt::format("lag {} log point(s)", *lags.begin())
                                           : fmt::format("lags {}", fmt::join(lags, ", "));
  row.detail = row.problems.empty()
                   ? fmt::format("every interval reported once, in order: {} windows in {} runs within {:g} ms + {:g} % "
                                 "of the shim's clock ({}; worst {:.1f} ms, {:.1f} %)", windows, judged, tol.ms,
                                 tol.share * 100.0, lag, worst_ms, worst_share * 100.0)
                   : fmt::format("{} problem(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

// ---- restart replay (--resume-at K) ----

// `template` with {dir} and {k} filled in: the flags that make a run save at K and exit, or load.
std::string restart_flags(const std::string& tmpl, const std::string& dir, int64_t k) {
  std::string out = std::regex_replace(tmpl, std::regex(R"(\{dir\})"), dir);
  return std::regex_replace(out, std::regex(R"(\{k\})"), std::to_string(k));
}

// The last non-empty line of a run's log: why it ended, when it ended badly.
std::string last_line(const PairRun& r) {
  std::ifstream in(r.log_path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last.size() > 200 ? last.substr(0, 197) + "..." : last;
}

// The loaded run `l` against the uninterrupted run `ref` from K+1: every value both logged, the set of iterations
// logged, and the digest at exit, per rank.
void judge_resumed(const PairRun& l, const PairRun& ref, int64_t k, const std::string& what,
                   std::vector<std::string>* problems, int64_t* values) {
  if (l.exit_code != 0 || !l.log) {
    problems->push_back(fmt::format("{}: {} failed: exit {}{}: {}", l.name(), what, l.exit_code,
                                    l.log ? "" : " and no log", last_line(l)));
    return;
  }
  const RunLog &a = ref.numbers(), &b = l.numbers();
  std::set<int64_t> want, got;
  for (const RunEntry& e : a.entries)
    if (e.iteration > k) want.insert(e.iteration);
  for (const RunEntry& e : b.entries) {
    if (e.iteration <= k) {
      problems->push_back(fmt::format("{}: logs iteration {} <= {}: it did not continue from the checkpoint ({})",
                                      l.name(), e.iteration, k, b.where(e)));
      return;
    }
    got.insert(e.iteration);
  }
  for (int64_t it : want)
    if (!got.count(it)) problems->push_back(fmt::format("{}: iteration {} not logged after the load", l.name(), it));
  // Every value field compare judges, and the loss scale (a restored grad scaler shows there first).
  std::vector<std::pair<std::string, std::optional<LoggedValue> RunEntry::*>> fields = {{"loss scale", &RunEntry::loss_scale}};
  for (const ComparedField& f : compared_fields())
    if (f.value) fields.emplace_back(f.name, f.value);
  for (const RunEntry& e : b.entries) {
    const RunEntry* r = a.find(e.iteration);
    if (!r) continue;
    for (const auto& [name, field] : fields) {
      if (!(e.*field) || !(r->*field)) continue;
      ++*values;
      if (!same_logged_value(*(r->*field), *(e.*field)))
        problems->push_back(fmt::format("{}: iteration {} {}: '{}' after the load, '{}' uninterrupted ({})", l.name(),
                                        e.iteration, name, (e.*field)->text, (r->*field)->text, what));
    }
  }
  for (size_t rank = 0; rank < std::min(l.values.size(), ref.values.size()); ++rank) {
    auto at_exit = [](const RunValues& v) {
      std::vector<StepDigest> out;
      for (const StepDigest& d : v.digests)
        if (d.step == "end") out.push_back(d);
      return out;
    };
    if (auto p = first_parting(at_exit(ref.values[rank]), at_exit(l.values[rank])))
      problems->push_back(fmt::format("{}: the parameters at exit part from {}'s on rank {}: first at {} ({} tensor(s))",
                                      l.name(), ref.name(), l.values[rank].rank, p->tensor, p->differing));
  }
}

// Restart replay: each arm saved at K and loaded to the end matches its uninterrupted run from K+1, bit for bit
// where the values are exact; the candidate loads the baseline's checkpoint and matches its own uninterrupted run.
CompareRow restart_row(const std::vector<PairRun>& runs, const std::vector<PairRun>& restart_runs, int64_t k) {
  CompareRow row;
  row.check = "restart";
  if (k <= 0) {
    row.detail = "not run: no --resume-at (each arm saved at K and loaded to the end proves the restart)";
    return row;
  }
  auto find = [&](const std::vector<PairRun>& v, const std::string& arm, const std::string& restart) -> const PairRun* {
    for (const PairRun& r : v)
      if (r.arm == arm && r.restart == restart && (!restart.empty() || (r.index > 0 && r.log))) return &r;
    return nullptr;
  };
  int64_t values = 0;
  bool exact = true;
  for (const char* arm : {"baseline", "candidate"}) {
    const PairRun* ref = find(runs, arm, "");
    const PairRun* save = find(restart_runs, arm, "save");
    if (!ref || !save) {
      row.problems.push_back(fmt::format("{}: no uninterrupted run or no save run to compare", arm));
      continue;
    }
    if (save->exit_code != 0)
      row.problems.push_back(fmt::format("{}: the save at {} failed: exit {}: {}", save->name(), k, save->exit_code,
                                         last_line(*save)));
    for (const char* role : {"load", "load-other"})
      if (const PairRun* l = find(restart_runs, arm, role)) {
        exact = exact && l->exact && ref->exact;
        judge_resumed(*l, *ref, k, std::string(role) == "load" ? fmt::format("loaded from its own save at {}", k)
                                                               : fmt::format("loaded from the baseline's save at {}", k),
                      &row.problems, &values);
      }
  }
  row.result = row.problems.empty() ? CompareResult::kPass : CompareResult::kFail;
  row.detail = row.problems.empty()
                   ? fmt::format("{} from iteration {}: {} values after the load equal the uninterrupted runs', the "
                                 "parameters at exit too where digested; the candidate loads the baseline's checkpoint",
                                 exact ? "bit-identical" : "identical as printed", k + 1, values)
                   : fmt::format("{} problem(s); first: {}", row.problems.size(), row.problems.front());
  return row;
}

// The check flags each arm ran with (a run with the NaN checks off measures something else).
CompareRow check_flags_row(const std::vector<PairRun>& runs) {
  static const char* const kFlags[] = {"check_for_nan_in_loss_and_grad", "rerun_mode", "check_for_spiky_loss",
                                       "check_for_large_grads", "check_collectives", "deterministic_mode"};
  CompareRow row;
  row.check = "check flags";
  row.result = CompareResult::kInfo;
  std::vector<std::string> shown;
  for (const char* flag : kFlags) {
    std::map<char, std::set<std::string>> seen;
    for (const PairRun& r : runs)
      if (r.log && r.log->arguments && r.log->arguments->count(flag)) seen[r.side()].insert(r.log->arguments->at(flag));
    if (seen.empty()) continue;
    auto join = [](const std::set<std::string>& v) {
      std::string s;
      for (const std::string& x : v) s += (s.empty() ? "" : "/") + x;
      return s.empty() ? std::string("(absent)") : s;
    };
    shown.push_back(seen['A'] == seen['B'] ? fmt::format("{} {}", flag, join(seen['A']))
                                           : fmt::format("{} {} (baseline) vs {} (candidate)", flag, join(seen['A']),
                                                         join(seen['B'])));
  }
  row.detail = shown.empty() ? "no check flag in the arguments blocks" : "";
  for (const std::string& s : shown) row.detail += (row.detail.empty() ? "" : "; ") + s;
  return row;
}

// ---- output ----

void write_outputs(const PairOptions& o, const std::vector<CompareRow>& rows, const std::vector<PairRun>& all, bool ok,
                   double seconds, const std::string& started) {
  FixtureRun fr;
  fr.fixture = "pair";
  fr.exit_code = ok ? 0 : 1;
  fr.seconds = seconds;
  fr.log_path = fs::absolute(o.out_dir).string();
  fr.launches = static_cast<int>(all.size());
  for (const CompareRow& r : rows) {
    std::string message = r.detail;
    for (const std::string& p : r.problems) message += "\n" + p;
    const std::string check = r.result == CompareResult::kInfo ? r.check + " (informational)" : r.check;
    Verdict v{"pair", check, "candidate", check, r.result != CompareResult::kFail, message};
    (r.result == CompareResult::kNotRun ? fr.skipped : fr.verdicts).push_back(v);
  }
  GateSummary g;
  g.ok = ok;
  g.started_at = started;
  g.seconds = seconds;
  g.arms = {"candidate"};
  g.runs = {fr};
  if (!o.json_path.empty()) {
    nlohmann::json j = gate_to_json(g);
    nlohmann::json list = nlohmann::json::array();
    for (const PairRun& r : all)
      list.push_back({{"run", r.name()}, {"exit_code", r.exit_code}, {"seconds", r.seconds}, {"log", r.log_path},
                      {"tables", r.tables.size()}});
    j["pair"] = {{"baseline", o.baseline}, {"candidate", o.candidate}, {"runs", list}, {"rows", compare_rows_json(rows)}};
    std::ofstream(o.json_path) << j.dump(1) << "\n";
  }
  if (!o.junit_path.empty()) write_junit(o.junit_path, g.runs);
  if (!o.html_path.empty())
    std::ofstream(o.html_path) << render_report(g, fs::absolute(o.out_dir).string(), utc_now());
}

}  // namespace

CLI::App* add_pair_command(CLI::App& app, PairOptions& o) {
  CLI::App* c = app.add_subcommand("pair", "gate a baseline and a candidate command (Megatron-LM, loopgate run): "
                                           "alternating runs, verdict rows, exit 0/1/2");
  c->add_option("--baseline", o.baseline, "the baseline's command line (run by /bin/sh -c); required unless --rejudge");
  c->add_option("--candidate", o.candidate, "the candidate's command line; required unless --rejudge");
  c->add_option("--rejudge", o.rejudge,
                "PAIR.json: an earlier pair's --json; judge the runs it lists, kept in --out-dir, with this call's "
                "flags, instead of running any");
  c->add_option("--runs", o.runs, "runs per arm, alternating A1 B1 A2 B2 ..., 1-100 (default 3)");
  c->add_option("--out-dir", o.out_dir, "every run's log and sync tables, OUT/ARM-N/ (default loopgate-pair)");
  c->add_option("--early", o.early, "lm loss and params norm identical at iterations 1..K, K >= 1 (default 2)");
  c->add_option("--allow-arg", o.allow_args, "NAME=REASON: an argument that may differ between the runs (repeatable)");
  c->add_option("--allow-sync", o.allow_syncs,
                "SITE=REASON: a site (substring) whose syncs per iteration may grow over the baseline's (repeatable)");
  c->add_option("--sync-budget", o.sync_budget,
                "a loopgate syncs table (loopgate syncs --json, a run's syncs.PID.json) whose syncs per iteration per "
                "site are the budget instead of the baseline's");
  c->add_option("--counter", o.counter,
                "cupti (each run under the CUDA sync counter, as loopgate syncs) | off (tables only where the command "
                "writes them into $LOOPGATE_PAIR_DIR, as loopgate run --syncs-json does); default cupti");
  c->add_option("--iter-fn", o.iter_fn, "with the counter: module:function whose every call begins an iteration");
  c->add_option("--iters", o.iters, "with the counter: A-B, count marked iterations A to B only");
  c->add_option("--inject-lib", o.inject_lib, "the injection library (default: the one built beside this loopgate)");
  c->add_option("--nan-inject", o.nan_inject,
                "a fault spec (iter=I,site=loss|grad[,...];...): one more run per arm with $LOOPGATE_NAN_INJECT set to "
                "it; both must detect it before the step, alike (repeatable: a pair of runs per spec, as a run may end "
                "at its first fault)");
  c->add_option("--values", o.values,
                "on (default): the shim records each run's exact values, parameter digests and log clocks "
                "(values.RANK.json in its folder; a Python program), and the rows judge bits; off: printed digits");
  c->add_option("--log-fn", o.log_fn, "with --values: module:function of the log function whose arguments are "
                                      "recorded (default megatron.training.training:training_log)");
  c->add_option("--timer-tolerance-ms", o.timer_tolerance_ms,
                "the timer row's absolute tolerance per window, ms >= 0 (default 5; the print's rounding is added)");
  c->add_option("--timer-tolerance", o.timer_tolerance,
                "the timer row's tolerance as a share of the window, 0 <= x < 1 (default 0.05)");
  c->add_option("--resume-at", o.resume_at,
                "K >= 0 (0, the default: off): each arm also runs saved at K (--save-flags) and loaded to the end (--load-flags), and the "
                "candidate loads the baseline's checkpoint; the restart row compares them with the uninterrupted runs "
                "from K+1");
  c->add_option("--save-flags", o.save_flags, "with --resume-at: appended to a command to save at {k} into {dir} and "
                                              "exit (default Megatron's: --save {dir} --save-interval {k} "
                                              "--exit-interval {k})");
  c->add_option("--load-flags", o.load_flags, "with --resume-at: appended to a command to load {dir} (default "
                                              "Megatron's: --load {dir})");
  c->add_option("--run-timeout", o.run_timeout, "seconds a run may take before its process group is ended, >= 0 "
                                                "(default 0: no limit)");
  c->add_flag("--fail-if-slower", o.fail_if_slower, "the step-time row fails when the candidate is significantly slower");
  c->add_option("--junit", o.junit_path, "the verdicts as JUnit XML");
  c->add_option("--html", o.html_path, "the verdicts as one HTML page (loopgate report's)");
  add_step_time_flags(c, o.json_path, o.alpha, o.step);  // as ab and compare define them
  return c;
}

int cmd_pair(const PairOptions& opts) {
  PairOptions o = opts;
  if (o.inject_lib.empty()) o.inject_lib = default_inject_lib(o.self_exe);
  check_pair_options(o);
  std::optional<SyncBudget> budget;  // read before any run: a table it cannot read is bad input
  if (!o.sync_budget.empty()) budget = table_budget(read_json_file("--sync-budget", o.sync_budget), o.sync_budget);
  if (stop_after_validation()) return 0;
  set_mpi_launch_env();
  const std::string started = utc_now();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<PairRun> runs, nan_runs, restart_runs;
  if (!o.rejudge.empty()) {
    kept_runs(o, &runs, &nan_runs, &restart_runs);
    std::printf("loopgate pair: judging the %zu run(s) %s lists, kept in %s\n  baseline:  %s\n  candidate: %s\n",
                runs.size() + nan_runs.size(), o.rejudge.c_str(), o.out_dir.c_str(), o.baseline.c_str(),
                o.candidate.c_str());
  } else {
    std::printf("loopgate pair: %d run(s) per arm, alternating; logs in %s\n  baseline:  %s\n  candidate: %s\n", o.runs,
                o.out_dir.c_str(), o.baseline.c_str(), o.candidate.c_str());
  }
  for (int i = 1; o.rejudge.empty() && i <= o.runs; ++i)
    for (const char* arm : {"baseline", "candidate"}) runs.push_back(run_one(o, arm, i, ""));
  for (size_t k = 0; o.rejudge.empty() && k < o.nan_inject.size(); ++k)
    for (const char* arm : {"baseline", "candidate"})
      nan_runs.push_back(run_one(o, arm, 0, o.nan_inject[k], o.nan_inject.size() > 1 ? static_cast<int>(k) + 1 : 0));
  if (o.rejudge.empty() && o.resume_at > 0) {  // saved at K, then loaded: its own arm's, and the baseline's
    auto checkpoint = [&](const std::string& arm) { return fs::absolute(fs::path(o.out_dir) / (arm + "-save") / "checkpoint").string(); };
    for (const char* arm : {"baseline", "candidate"})
      restart_runs.push_back(run_restart(o, arm, "save", restart_flags(o.save_flags, checkpoint(arm), o.resume_at)));
    for (const char* arm : {"baseline", "candidate"})
      restart_runs.push_back(run_restart(o, arm, "load", restart_flags(o.load_flags, checkpoint(arm), o.resume_at)));
    restart_runs.push_back(
        run_restart(o, "candidate", "load-other", restart_flags(o.load_flags, checkpoint("baseline"), o.resume_at)));
  }

  std::vector<CompareRun> logs;
  for (const PairRun& r : runs)
    if (r.log) logs.push_back({r.side(), r.numbers()});
  std::vector<CompareRow> rows = {completed_row(runs), arguments_row(runs, declared(o.allow_args, "--allow-arg"))};
  const bool both = std::any_of(logs.begin(), logs.end(), [](const CompareRun& r) { return r.side == 'A'; }) &&
                    std::any_of(logs.begin(), logs.end(), [](const CompareRun& r) { return r.side == 'B'; });
  if (both)
    for (CompareRow& r : judged_rows(logs, o.early)) rows.push_back(std::move(r));
  rows.push_back(digest_row(runs));
  rows.push_back(timer_row(runs, TimerTolerance{o.timer_tolerance_ms, o.timer_tolerance}));
  rows.push_back(restart_row(runs, restart_runs, o.resume_at));
  rows.push_back(nan_row(nan_runs));
  SyncsRow syncs = syncs_row(runs, declared(o.allow_syncs, "--allow-sync"), budget ? &*budget : nullptr, o.sync_budget);
  rows.push_back(syncs.row);
  StepTimeRow st;
  st.row.check = "step time";
  st.row.detail = "not run: a side has no log";
  if (both) st = step_time_row(logs, o.step, o.alpha);
  st.row.check = "step time";
  if (o.fail_if_slower && st.ran && st.verdict.kind == StepTimeVerdictKind::kSlower) st.row.result = CompareResult::kFail;
  rows.push_back(st.row);
  rows.push_back(check_flags_row(runs));

  const bool ok = std::none_of(rows.begin(), rows.end(), [](const CompareRow& r) { return r.result == CompareResult::kFail; });
  print_compare_table(rows, ok);
  print_compare_problems(rows);
  if (!syncs.a.empty()) std::printf("\n%s", format_sync_diff(syncs.a, syncs.b, "baseline", "candidate").c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<PairRun> all = runs;
  all.insert(all.end(), nan_runs.begin(), nan_runs.end());
  all.insert(all.end(), restart_runs.begin(), restart_runs.end());
  write_outputs(o, rows, all, ok, seconds, started);
  return ok ? 0 : 1;
}

}  // namespace loopgate
