// `loopgate gate`'s launches (commands.h run_gate_fixtures): the gate suites under mpiexec once per fixture, or
// per shard (its tests split round-robin, GPU blocks assigned); each launch's log echoed as it grows; a launch
// aborted inside a test (a hang the watchdog breaks, a throw, an MPI error) relaunched for the tests it did not
// reach, refusing the scenario it hung in; the verdicts read back from each launch's progress file; the shards
// merged into one run per fixture. Not here: the table, the JSON (gate.cpp, verdicts.h).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>

#include <sched.h>

#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/launch_plan.h"
#include "tools/loopgate/paths.h"
#include "tools/loopgate/process.h"
#include "tools/loopgate/verdicts.h"
#include "trainer/parallel/recorded_comm.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

std::string check_of_suite(const std::string& suite_or_test) {
  for (const auto& [check, suite] : gate_checks())
    if (suite_or_test.rfind(suite, 0) == 0) return check;
  return "";
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// One verdict from a test's identity (suite, name, value_param as GoogleTest prints them). Candidate-arm tests
// (Arms/...) carry their arm in value_param; another parameterized test (LrScheduleCase: one LR case) counts for
// all arms. The GatePower tests (and parameterized GatePower/<Check>... ones) are reported under the arm
// "(planted defect)". An empty check: not a gate test.
Verdict make_verdict(const std::string& fixture, std::string suite, const std::string& name,
                     const std::string& value_param) {
  Verdict v;
  v.fixture = fixture;
  v.test = suite + "." + name;
  const bool per_arm = suite.rfind("Arms/", 0) == 0;  // only there does the value parameter name an arm
  if (per_arm) suite = suite.substr(5);
  if (suite.rfind("GatePower/", 0) == 0) {  // a parameterized power test: GatePower/<Check>...
    v.check = check_of_suite(suite.substr(10));
    v.arm = kPlantedDefect;
    return v;
  }
  v.check = suite == "GatePower" ? check_of_suite(name) : check_of_suite(suite);
  if (per_arm && !value_param.empty()) {
    v.arm = value_param;
    if (v.arm.size() >= 2 && v.arm.front() == '"') v.arm = v.arm.substr(1, v.arm.size() - 2);
  } else {
    v.arm = suite == "GatePower" ? kPlantedDefect : kAllArms;
  }
  return v;
}

// What one launch's progress file says: the verdict of every test that ended, and the test it was in when it
// was aborted ("" when none).
struct LaunchOutcome {
  std::vector<Verdict> verdicts, skipped;
  std::vector<std::string> seen;  // full names of every test that started
  std::string aborted_in;         // full name
  std::string aborted_suite, aborted_name, aborted_param;
  std::string open_scenario;      // the scenario the aborted test was in ("KEY arm ARM"; "" when none)
};

LaunchOutcome read_progress(const std::string& fixture, const std::string& path) {
  LaunchOutcome out;
  std::ifstream in(path);
  std::string line, open;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;  // a line cut by the abort
    const std::string full = j.value("suite", "") + "." + j.value("name", "");
    if (j.value("event", "") == "scenario") {
      out.open_scenario = j.value("scenario", "");
      continue;
    }
    if (j.value("event", "") == "start") {
      out.open_scenario.clear();
      open = full;
      out.seen.push_back(full);
      out.aborted_suite = j.value("suite", "");
      out.aborted_name = j.value("name", "");
      out.aborted_param = j.value("value_param", "");
      continue;
    }
    open.clear();
    out.open_scenario.clear();
    Verdict v = make_verdict(fixture, j.value("suite", ""), j.value("name", ""), j.value("value_param", ""));
    const bool passed = j.value("passed", false);
    if (v.check.empty() && passed) continue;  // not a gate test
    if (v.check.empty()) v.check = "other";    // a failing non-gate test still fails the job
    v.passed = passed;
    v.message = j.value("message", "");
    if (j.value("skipped", false)) {
      out.skipped.push_back(v);
      continue;
    }
    out.verdicts.push_back(v);
  }
  out.aborted_in = open;
  return out;
}

// Where the ranks stood when the job was aborted, from each rank's "loopgate collectives: rank R: ..." line (the
// collective record's, recorded_comm.h): one line naming where they part, or "" when no rank printed one.
std::string collectives_verdict(const std::map<int, std::string>& where) {
  if (where.empty()) return "";
  std::map<std::string, std::vector<int>> by_place;
  for (const auto& [rank, place] : where) by_place[place].push_back(rank);
  auto ranks = [](const std::vector<int>& r) {
    return fmt::format("rank{} {}", r.size() > 1 ? "s" : "", fmt::join(r, ","));
  };
  if (by_place.size() == 1)
    return fmt::format("collectives: every rank that reported ({}) is {}", ranks(by_place.begin()->second),
                       by_place.begin()->first);
  // The same collective with another size on some rank: the cause, named before where each rank stands.
  const std::string mismatch = mismatched_call(where);
  std::string out = mismatch.empty() ? "collectives: the ranks part here:"
                                     : "collectives: " + mismatch + "; the ranks part here:";
  for (const auto& [place, r] : by_place) out += fmt::format(" {} {};", ranks(r), place);
  out.pop_back();
  return out;
}

// The lines of a launch's log that say why it was aborted (the watchdog's, a throw, MPI's, the collective
// record's), then where the ranks part.
std::string abort_lines(const std::string& log_path) {
  static const std::regex record(R"(^loopgate collectives: rank (\d+): (.*)$)");
  static const std::regex watchdog(R"(^loopgate watchdog: rank (\d+): .*last site: ([^)]*)\); aborting)");
  static const std::regex held(R"(^loopgate watchdog: rank \d+: .*collective records hold a (size mismatch in [^;]*))");
  std::map<int, std::string> where, outside;  // outside: a stalled rank whose run's record was gone (or never on)
  std::string mismatch;
  std::ifstream in(log_path);
  std::string line, out;
  int n = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, record)) where[std::stoi(m[1])] = m[2];
    if (std::regex_search(line, m, watchdog))
      outside[std::stoi(m[1])] = fmt::format("outside the run's collectives (last site: {})", m[2].str());
    if (std::regex_search(line, m, held) && mismatch.empty()) mismatch = m[1];
    if (n < 64 && (line.find("loopgate watchdog:") != std::string::npos || line.rfind("loopgate: rank", 0) == 0 ||
                   line.find("MPI_ABORT") != std::string::npos ||
                   line.find("exited due to process rank") != std::string::npos ||
                   line.find("noticed that process rank") != std::string::npos)) {
      out += line + "\n";
      ++n;
    }
  }
  if (!where.empty())
    for (const auto& [rank, place] : outside) where.emplace(rank, place);  // only where some rank has a record
  std::string verdict = collectives_verdict(where);
  // A mismatch the ranks' recent calls hold (the watchdog's exchange) leads when the last calls do not show it.
  if (!mismatch.empty() && verdict.find("size mismatch") == std::string::npos)
    verdict = "collectives: " + mismatch + (verdict.empty() ? "" : "\n" + verdict);
  if (!verdict.empty()) out = verdict + "\n" + out;
  return out.empty() ? "aborted (see " + log_path + ")" : out;
}

// The scenario a watchdog line says the job hung in ("KEY arm ARM"), or "" (none named, or outside a scenario).
std::string hung_scenario(const std::string& abort_text) {
  static const std::regex line(R"(loopgate watchdog: rank \d+: test \S+ made no progress for [0-9.]+ s \(scenario (.+), iteration -?\d+, last site)");
  std::smatch m;
  if (!std::regex_search(abort_text, m, line) || m[1] == "-") return "";
  return m[1];
}

// One fixture's launch of the suites, running in the background; its log is echoed as it grows. A launch that
// is aborted inside a test (a hang the watchdog breaks, a throw, an MPI error) is relaunched for the tests it
// did not reach, so one broken test costs its own verdict, not the fixture's.
struct Launch {
  FixtureRun r;
  LaunchUnit unit;
  const GateOptions* o = nullptr;
  std::string dir, trace_dir, progress, attempt_log;
  std::vector<std::string> excluded;  // tests earlier attempts started (finished or aborted in)
  std::string hung_file;              // scenarios earlier attempts hung in (--lg_hung_file): not run again
  std::chrono::steady_clock::time_point start;
  std::unique_ptr<Process> process;  // the current attempt's mpiexec, in the CLI's process group (Ctrl-C reaches it)
  std::ifstream log;
  std::string pending;
  size_t index = 0;
};

// A unit's log and progress name: fixture, GPU-only tag, shard.
std::string unit_name(const LaunchUnit& u) {
  return u.fixture.name + u.tag + (u.shards > 1 ? fmt::format(".shard{}", u.shard) : "");
}

// The suites executable and its harness flags for a unit (the launch and the test listing share them).
std::string suite_command(const GateOptions& o, const LaunchUnit& u) {
  std::string cmd = fmt::format("{} --lg_fixture={}", u.exe, u.fixture.name);
  if (u.device != "cpu") cmd += " --lg_device=" + u.device;
  if (!o.arms.empty()) cmd += " --lg_arms=" + join(o.arms, ",");
  if (o.iters) cmd += fmt::format(" --lg_iters={}", *o.iters);
  if (o.skip_rejected_arms) cmd += " --lg_skip_rejected_arms=1";
  return cmd;
}

void start_attempt(Launch& l) {
  const GateOptions& o = *l.o;
  const int attempt = l.r.launches++;
  const std::string name = unit_name(l.unit);
  l.attempt_log = attempt == 0 ? l.r.log_path : fmt::format("{}/{}.relaunch{}.log", l.dir, name, attempt);
  l.progress = fmt::format("{}/{}.progress{}.jsonl", l.dir, name, attempt);
  std::string filter = l.unit.filter;
  if (!l.excluded.empty()) filter += "-" + join(l.excluded, ":");
  std::string cmd = fmt::format("{}{} -n {} {}", l.unit.gpus.empty() ? "" : "CUDA_VISIBLE_DEVICES=" + l.unit.gpus + " ",
                                o.mpiexec, l.r.np, suite_command(o, l.unit));
  cmd += fmt::format(" --lg_trace_dir={} --lg_progress_file={} --lg_timeout={} --lg_progress_timeout={} "
                     "'--gtest_filter={}'",
                     l.trace_dir, l.progress, l.r.np > 8 ? 1200 : 300, o.progress_timeout, filter);
  if (!l.hung_file.empty()) cmd += " --lg_hung_file=" + l.hung_file;
  ProcessSpec spec;
  spec.shell = cmd;
  spec.log_path = l.attempt_log;
  l.process = std::make_unique<Process>(spec);
  l.log.close();
  l.log.clear();
  l.pending.clear();
}

std::unique_ptr<Launch> launch_fixture(const GateOptions& o, const LaunchUnit& u, const std::string& dir, size_t index,
                                       size_t total) {
  const Fixture& f = u.fixture;
  auto l = std::make_unique<Launch>();
  l->o = &o;
  l->unit = u;
  l->dir = dir;
  l->index = index;
  l->r.fixture = f.name;
  l->r.np = f.world;
  l->r.log_path = fmt::format("{}/{}.log", dir, unit_name(u));
  // Shards write their own Traces (two may run the same scenario at once).
  l->trace_dir = fmt::format("{}/{}", dir, u.shards > 1 ? unit_name(u) : f.name);
  const std::string what = !u.tag.empty()   ? "the GPU-only suites (" + u.tag.substr(1) + ")"
                           : u.shards > 1 ? fmt::format("the gate suites, shard {} of {}", u.shard + 1, u.shards)
                                          : std::string("the gate suites");
  if (o.echo)
    std::printf("[%zu/%zu] %-10s np %-3d launching %s\n", index + 1, total, f.name.c_str(), f.world, what.c_str());
  std::fflush(stdout);
  l->start = std::chrono::steady_clock::now();
  start_attempt(*l);
  return l;
}

// A progress line "KEY arm ARM: ..." names a scenario whose Trace the suites wrote to trace_dir (when they could).
void note_trace(const std::string& line, const std::string& trace_dir, std::vector<TraceFile>* traces) {
  const size_t arm_at = line.find(" arm ");
  const size_t colon = line.find(':', arm_at == std::string::npos ? line.size() : arm_at);
  if (arm_at == std::string::npos || colon == std::string::npos) return;
  TraceFile t{line.substr(0, arm_at), line.substr(arm_at + 5, colon - arm_at - 5), ""};
  t.path = trace_dir + "/" + trace_file_name(t.scenario, t.arm);
  if (access(t.path.c_str(), R_OK) == 0) traces->push_back(t);
}

// Echoes the scenario lines written since the last poll; true once the launch has finished (verdicts read),
// relaunching first for the tests an aborted attempt did not reach.
bool poll_launch(Launch& l) {
  const std::optional<int> ended = l.process->poll();  // before reading the log: once ended, it is all there
  if (!l.log.is_open()) l.log.open(l.attempt_log);
  std::string line;
  while (l.log.is_open() && std::getline(l.log, line)) {
    if (l.log.eof()) {  // partial line: keep for the next poll
      l.pending += line;
      break;
    }
    line = l.pending + line;
    l.pending.clear();
    if (line.rfind("loopgate scenario: ", 0) == 0) {
      if (l.o->echo) std::printf("      %-10s %s\n", l.r.fixture.c_str(), line.substr(19).c_str());
      note_trace(line.substr(19), l.trace_dir, &l.r.traces);
    }
  }
  if (l.log.is_open()) l.log.clear();
  std::fflush(stdout);
  if (!ended) return false;
  const int rc = *ended;
  LaunchOutcome out = read_progress(l.r.fixture, l.progress);
  l.r.verdicts.insert(l.r.verdicts.end(), out.verdicts.begin(), out.verdicts.end());
  l.r.skipped.insert(l.r.skipped.end(), out.skipped.begin(), out.skipped.end());
  l.r.exit_code = l.r.aborted.empty() ? rc : std::max(rc, 1);
  if (rc != 0 && !out.aborted_in.empty()) {
    // The attempt died inside a test: that test fails with the abort's own lines; the rest run again.
    Verdict v = make_verdict(l.r.fixture, out.aborted_suite, out.aborted_name, out.aborted_param);
    if (v.check.empty()) v.check = "other";
    v.passed = false;
    const std::string why = abort_lines(l.attempt_log);
    v.message = "the launch was aborted in this test:\n" + why;
    l.r.verdicts.push_back(v);
    // A hang in a scenario (the watchdog names it), or a job that ended inside one otherwise (a rank died, a throw:
    // the progress file names it): the relaunch refuses that scenario, so the tests that share it fail at once.
    const std::string hung = hung_scenario(why);
    if (const std::string ended = hung.empty() ? out.open_scenario : hung; !ended.empty()) {
      l.hung_file = fmt::format("{}/{}.hung", l.dir, unit_name(l.unit));
      std::ofstream(l.hung_file, std::ios::app) << ended << "\t" << out.aborted_in << "\n";
      if (l.o->echo)
        std::printf("      %-10s %s in scenario %s: the relaunch does not run it again\n", l.r.fixture.c_str(),
                    hung.empty() ? "ended the job" : "hung", ended.c_str());
    }
    l.r.aborted.push_back(out.aborted_in);
    l.r.exit_code = rc;
    l.excluded.insert(l.excluded.end(), out.seen.begin(), out.seen.end());
    if (l.o->relaunch_after_abort) {
      if (l.o->echo)
        std::printf("      %-10s aborted in %s (exit %d): relaunching for the tests not yet run\n",
                    l.r.fixture.c_str(), out.aborted_in.c_str(), rc);
      std::fflush(stdout);
      start_attempt(l);
      return false;
    }
  }
  l.r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.start).count();
  return true;
}

// The cores CPU launches may keep busy: --cpus, else the cores this process may run on (a container's share).
int cpu_budget(const GateOptions& o) {
  if (o.cpus > 0) return o.cpus;
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
}

// How many processes share a fixture's gate suites: --shards; by default on CPU as many as the fixture's ranks fit
// the cores (single on 2 cores: 2, side by side; a fixture that holds the cores already: 1), and on a GPU one per
// block of `ranks` visible GPUs, at most 8. More processes than blocks share GPUs and
// lost on one H200: 8 time-sliced shards of single took 226 s against 173 s for one process (results/history/results-gpu-log.md
// §14); under an MPS server 8 and 4 shards ran each scenario 5-9x slower than one process did (§19).
int shard_count(const GateOptions& o, const LaunchUnit& u, int gpus) {
  if (!u.tag.empty()) return 1;
  if (o.shards > 0) return o.shards;
  if (o.device != "cuda") return std::clamp(cpu_budget(o) / u.fixture.world, 1, 8);
  return std::clamp(gpus / u.fixture.world, 1, 8);
}

// The runner's GPU ids in order: CUDA_VISIBLE_DEVICES's list when set, else 0..n-1.
std::vector<std::string> visible_gpu_ids(int n) {
  std::vector<std::string> ids;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    std::string s = v;
    for (size_t at = 0; at <= s.size();) {
      size_t comma = std::min(s.find(',', at), s.size());
      if (comma > at) ids.push_back(s.substr(at, comma - at));
      at = comma + 1;
    }
    return ids;
  }
  for (int i = 0; i < n; ++i) ids.push_back(std::to_string(i));
  return ids;
}

// The unit's tests as the suites executable lists them (a singleton, no MPI job). Empty when it cannot list.
std::vector<std::string> list_tests(const GateOptions& o, const LaunchUnit& u) {
  const std::string cmd = suite_command(o, u) + " --gtest_list_tests '--gtest_filter=" + u.filter + "' 2>/dev/null";
  int status = 0;
  const std::string out = command_output(cmd, &status);
  return status == 0 ? parse_test_list(out) : std::vector<std::string>{};
}

std::vector<LaunchUnit> sharded(const GateOptions& o, const std::vector<LaunchUnit>& units) {
  const int gpus = o.device == "cuda" ? visible_gpu_count() : 0;
  std::vector<LaunchUnit> out;
  for (const LaunchUnit& u : units) {
    const int n = shard_count(o, u, gpus);
    std::vector<LaunchUnit> parts = n > 1 ? split_unit(u, list_tests(o, u), n) : std::vector<LaunchUnit>{u};
    // GPU shards run side by side, each on a block of GPUs; more shards than blocks share them.
    if (o.device == "cuda" && parts.size() > 1 && assign_gpus(&parts, visible_gpu_ids(gpus), u.fixture.world) &&
        static_cast<int>(parts.size()) > gpus / u.fixture.world)
      std::printf("loopgate gate: %s's %zu shards share %d GPU(s): slower than one per GPU where measured "
                  "(results/history/results-gpu-log.md §19)\n", u.fixture.name.c_str(), parts.size(), gpus);
    out.insert(out.end(), parts.begin(), parts.end());
  }
  return out;
}

// A fixture's shards as one run: every verdict, the longest shard's time, the worst exit code.
std::vector<FixtureRun> merge_shards(const std::vector<LaunchUnit>& units, const std::vector<FixtureRun>& runs) {
  std::vector<FixtureRun> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (units[i].shard == 0) {
      out.push_back(runs[i]);
      continue;
    }
    FixtureRun& m = out.back();  // shard 0 of the same unit, just before
    const FixtureRun& r = runs[i];
    if (r.exit_code != 0 && m.exit_code == 0) m.log_path = r.log_path;
    m.exit_code = std::max(m.exit_code, r.exit_code);
    m.seconds = std::max(m.seconds, r.seconds);
    m.launches += r.launches;
    m.aborted.insert(m.aborted.end(), r.aborted.begin(), r.aborted.end());
    m.verdicts.insert(m.verdicts.end(), r.verdicts.begin(), r.verdicts.end());
    m.skipped.insert(m.skipped.end(), r.skipped.begin(), r.skipped.end());
    m.traces.insert(m.traces.end(), r.traces.begin(), r.traces.end());
  }
  return out;
}

// Runs every launch, in order. On CPU launches run side by side while their ranks fit the cores (cpu_budget: a rank
// a core, since a rank waiting in a collective spins); one with more ranks than cores runs alone. On a GPU, shards
// holding GPUs of their own run side by side (a GPU shared by two processes is time-sliced), anything else alone.
std::vector<FixtureRun> run_fixtures(const GateOptions& o, const std::vector<LaunchUnit>& fixtures,
                                     const std::string& dir) {
  std::vector<FixtureRun> runs(fixtures.size());
  std::vector<std::unique_ptr<Launch>> active;
  size_t next = 0;
  const int cores = cpu_budget(o);
  while (next < fixtures.size() || !active.empty()) {
    int busy = 0;
    for (const auto& l : active) busy += l->r.np;
    bool own_gpus = next < fixtures.size() && !fixtures[next].gpus.empty();
    for (const auto& l : active) own_gpus = own_gpus && !l->unit.gpus.empty();
    if (next < fixtures.size() &&
        (active.empty() || (o.device == "cuda" ? own_gpus : busy + fixtures[next].fixture.world <= cores))) {
      active.push_back(launch_fixture(o, fixtures[next], dir, next, fixtures.size()));
      ++next;
      continue;
    }
    for (size_t i = 0; i < active.size();) {
      if (!poll_launch(*active[i])) {
        ++i;
        continue;
      }
      const FixtureRun& r = active[i]->r;
      int failed = 0;
      for (const Verdict& v : r.verdicts) failed += !v.passed;
      if (o.echo)
        std::printf("[%zu/%zu] %-10s np %-3d %zu verdicts, %d failed, exit %d, %.1f s%s\n", active[i]->index + 1,
                  fixtures.size(), r.fixture.c_str(), r.np, r.verdicts.size(), failed, r.exit_code, r.seconds,
                  r.verdicts.empty() ? (" - no verdicts: see " + r.log_path).c_str() : "");
      std::fflush(stdout);
      runs[active[i]->index] = r;
      active.erase(active.begin() + static_cast<long>(i));
    }
    usleep(200 * 1000);
  }
  return runs;
}

}  // namespace

std::vector<FixtureRun> run_gate_fixtures(const GateOptions& o, const std::vector<Fixture>& fixtures,
                                          const std::string& dir) {
  set_mpi_launch_env();
  setenv("GTEST_COLOR", "no", 1);
  const std::vector<LaunchUnit> units = sharded(o, launch_units(o, fixtures));
  return merge_shards(units, run_fixtures(o, units, dir));
}

// Ranks run as root, oversubscribed, in containers (docs/design.md "CPU facts"); the user's own
// settings win.
void set_mpi_launch_env() {
  static const std::pair<const char*, const char*> kEnv[] = {
#include "mpi_env.inc"  // ctest/mpi-env.list, the launch environment's one home
  };
  for (const auto& [key, value] : kEnv) setenv(key, value, /*overwrite=*/0);
}

}  // namespace loopgate
