// `loopgate gate`: the main job. For each fixture it launches the gate suites executable under mpiexec once
// (every gate's scenarios run inside that launch), echoes one progress line per scenario, then reads the
// suites' GoogleTest JSON and prints a verdict table (fixture x check x arm), nccl-tests style: header once,
// one row per (fixture, check), footer with totals and OK/FAILED. Exit: 0 pass, 1 a gate failed, 2 bad input.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <map>
#include <memory>
#include <set>

#include "fixtures/fixtures.h"
#include "fixtures/golden.h"
#include "fixtures/loop_checks.h"
#include "fixtures/scenarios.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/launch_plan.h"
#include "tools/loopgate/validate.h"
#include "tools/loopgate/verdicts.h"
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
};

LaunchOutcome read_progress(const std::string& fixture, const std::string& path) {
  LaunchOutcome out;
  std::ifstream in(path);
  std::string line, open;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;  // a line cut by the abort
    const std::string full = j.value("suite", "") + "." + j.value("name", "");
    if (j.value("event", "") == "start") {
      open = full;
      out.seen.push_back(full);
      out.aborted_suite = j.value("suite", "");
      out.aborted_name = j.value("name", "");
      out.aborted_param = j.value("value_param", "");
      continue;
    }
    open.clear();
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

// The lines of a launch's log that say why it was aborted (the watchdog's, a throw, MPI's).
std::string abort_lines(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string line, out;
  int n = 0;
  while (std::getline(in, line) && n < 12)
    if (line.find("loopgate watchdog:") != std::string::npos || line.rfind("loopgate: rank", 0) == 0 ||
        line.find("MPI_ABORT") != std::string::npos || line.find("exited due to process rank") != std::string::npos) {
      out += line + "\n";
      ++n;
    }
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
  cmd += " > " + l.attempt_log + " 2>&1";
  std::string bg = "(" + cmd + "; echo $? > " + l.attempt_log + ".rc) &";
  if (std::system(bg.c_str()) != 0) throw Error("could not launch: " + cmd);
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
  bool done = access((l.attempt_log + ".rc").c_str(), F_OK) == 0;
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
  if (!done) return false;
  int rc = 0;
  std::ifstream(l.attempt_log + ".rc") >> rc;
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
    // A hang in a scenario: the relaunch refuses that scenario, so the tests that share it fail at once.
    if (const std::string hung = hung_scenario(why); !hung.empty()) {
      l.hung_file = fmt::format("{}/{}.hung", l.dir, unit_name(l.unit));
      std::ofstream(l.hung_file, std::ios::app) << hung << "\t" << out.aborted_in << "\n";
      if (l.o->echo)
        std::printf("      %-10s hung in scenario %s: the relaunch does not run it again\n", l.r.fixture.c_str(),
                    hung.c_str());
    }
    l.r.aborted.push_back(out.aborted_in);
    l.r.exit_code = rc;
    l.excluded.insert(l.excluded.end(), out.seen.begin(), out.seen.end());
    if (l.o->echo)
      std::printf("      %-10s aborted in %s (exit %d): relaunching for the tests not yet run\n", l.r.fixture.c_str(),
                  out.aborted_in.c_str(), rc);
    std::fflush(stdout);
    start_attempt(l);
    return false;
  }
  l.r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.start).count();
  return true;
}

// How many processes share a fixture's gate suites: --shards; by default 1 on CPU (the ranks already hold the
// cores) and on a GPU one per block of `ranks` visible GPUs, at most 8. More processes than blocks share GPUs and
// lost on one H200: 8 time-sliced shards of single took 226 s against 173 s for one process (docs/results-gpu.md
// §14); under an MPS server 8 and 4 shards ran each scenario 5-9x slower than one process did (§19).
int shard_count(const GateOptions& o, const LaunchUnit& u, int gpus) {
  if (!u.tag.empty()) return 1;
  if (o.shards > 0) return o.shards;
  if (o.device != "cuda") return 1;
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
                  "(docs/results-gpu.md §19)\n", u.fixture.name.c_str(), parts.size(), gpus);
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

// Runs every fixture's launch. Fixtures of at most 2 ranks may run `jobs` at a time (a machine with more cores
// than ranks gains; on 2 cores it lost: 131 s for single+tp2sp+pp2 two at a time, 105 s one at a time); larger
// fixtures run alone.
std::vector<FixtureRun> run_fixtures(const GateOptions& o, const std::vector<LaunchUnit>& fixtures,
                                     const std::string& dir) {
  std::vector<FixtureRun> runs(fixtures.size());
  std::vector<std::unique_ptr<Launch>> active;
  size_t next = 0;
  auto small = [](int np) { return np <= 2; };
  while (next < fixtures.size() || !active.empty()) {
    bool all_small = true;
    for (const auto& l : active) all_small = all_small && small(l->r.np);
    // GPU shards holding GPUs of their own run side by side (a GPU shared by two processes is time-sliced).
    bool own_gpus = next < fixtures.size() && !fixtures[next].gpus.empty();
    for (const auto& l : active) own_gpus = own_gpus && !l->unit.gpus.empty();
    if (next < fixtures.size() &&
        (active.empty() || own_gpus ||
         (all_small && small(fixtures[next].fixture.world) && static_cast<int>(active.size()) < o.jobs))) {
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

void print_table(const std::vector<FixtureRun>& runs, const std::vector<std::string>& arms) {
  std::string head = fmt::format("{:<11} {:<15} {:>11}", "fixture", "check", "baseline");
  for (const std::string& a : arms) head += fmt::format(" {:>11}", a.substr(0, 11));
  head += fmt::format(" {:>11}", "defect");
  std::printf("\n%s\n", head.c_str());
  std::printf("%s\n", std::string(head.size(), '-').c_str());
  for (const VerdictRow& v : verdict_rows(runs, arms)) {
    std::string row = fmt::format("{:<11} {:<15} {:>11}", v.fixture, v.check, v.baseline);
    for (const std::string& c : v.cells) row += fmt::format(" {:>11}", c);
    row += fmt::format(" {:>11}", v.defect);
    std::printf("%s\n", row.c_str());
  }
}

// Tests that skipped themselves are no verdict (neither pass nor fail): one line per fixture, check and reason,
// so a check that could not run here is said, never counted as passed.
void print_skipped(const std::vector<FixtureRun>& runs) {
  std::map<std::string, int> lines;
  for (const FixtureRun& r : runs)
    for (const Verdict& v : r.skipped) {
      // The message is "file:line" then the reason given to GTEST_SKIP.
      const size_t nl = v.message.find('\n');
      std::string why = nl == std::string::npos ? "" : v.message.substr(nl + 1);
      why = why.substr(0, why.find('\n'));
      ++lines[fmt::format("{} {}: {}", r.fixture, v.check, why.empty() ? "(no reason given)" : why)];
    }
  if (lines.empty()) return;
  std::printf("\nskipped (not verdicts):\n");
  for (const auto& [line, n] : lines) std::printf("  %s (%d test%s)\n", line.c_str(), n, n == 1 ? "" : "s");
}


// The arms and fixtures the suites executable knows, its own registrations included (docs/custom-arms.md): a
// user's executable may register arms and fixtures this CLI has never heard of. Asked with `EXE --lg_describe=json`
// (one JSON line, no MPI); InputError with the executable's own words when it does not answer.
struct SuitesRegistry {
  std::vector<std::string> arms;
  std::vector<Fixture> fixtures;
};

SuitesRegistry describe_suites(const std::string& exe) {
  const std::string cmd = "'" + exe + "' --lg_describe=json 2>&1";
  int status = 0;
  std::string out = command_output(cmd, &status);
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (status == 0 && j.is_object() && j.contains("arms") && j.contains("fixtures")) {
    SuitesRegistry r;
    for (const auto& a : j["arms"]) r.arms.push_back(a.at("name").get<std::string>());
    for (const auto& f : j["fixtures"])
      r.fixtures.push_back({f.at("name").get<std::string>(), f.at("world").get<int>(), f.value("description", "")});
    return r;
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  throw InputError(fmt::format("{} --lg_describe=json did not list its arms and fixtures (is it a loopgate gate "
                               "suites executable?): {}", exe, out.substr(0, out.find('\n'))));
}

const Fixture& find_in(const SuitesRegistry& r, const std::string& name) {
  std::vector<std::string> known;
  for (const Fixture& f : r.fixtures) {
    if (f.name == name) return f;
    known.push_back(f.name);
  }
  throw InputError(fmt::format("--fixture: unknown fixture '{}' (known: {})", name, join(known, ", ")));
}

void check_arm_in(const SuitesRegistry& r, const std::string& name) {
  if (std::find(r.arms.begin(), r.arms.end(), name) != r.arms.end()) return;
  throw InputError(fmt::format("--arm: unknown arm '{}' (known: {})", name, join(r.arms, ", ")));
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
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 0);  // fewer page faults starting each rank (design.md)
  setenv("OMP_NUM_THREADS", "1", 0);
  setenv("ATEN_CPU_CAPABILITY", "avx2", 0);
  setenv("OPENBLAS_CORETYPE", "Haswell", 0);
}

int cmd_gate(const GateOptions& o_in) {
  GateOptions o = o_in;
  // Everything before launching anything (validate.h); the arm and fixture names against what the suites
  // executable knows (a user's registers its own: docs/custom-arms.md).
  validate_gate_options(o);
  const SuitesRegistry known = describe_suites(o.suites_exe);
  std::vector<Fixture> fixtures;
  if (o.fixtures.empty()) {
    fixtures = known.fixtures;
  } else {
    for (const std::string& f : o.fixtures) fixtures.push_back(find_in(known, f));
  }
  for (const std::string& a : o.arms) check_arm_in(known, a);
  if (o.device == "cuda") fixtures = fixtures_that_fit(fixtures, visible_gpu_count(), "gate");
  if (stop_after_validation()) return 0;
  set_mpi_launch_env();
  setenv("LOOPGATE_GOLDEN_DIR", default_golden_dir().c_str(), 0);  // this CLI's golden/ (the installed one if installed)
  setenv("LOOPGATE_TRAINER_DIR", trainer_source_dir().c_str(), 0);  // and its trainer's sources (loop_code's scan)
  setenv("GTEST_COLOR", "no", 1);

  char tmpl[] = "/tmp/loopgate-gate-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::vector<std::string> arms = o.arms.empty() ? default_candidates() : o.arms;
  std::printf("loopgate gate: fixtures %zu, candidate arms %s; logs in %s\n", fixtures.size(), join(arms, ",").c_str(),
              dir.c_str());
  const std::string started_at = utc_now();
  auto start = std::chrono::steady_clock::now();
  const std::vector<LaunchUnit> units = sharded(o, launch_units(o, fixtures));
  std::vector<FixtureRun> runs = merge_shards(units, run_fixtures(o, units, dir));
  print_table(runs, arms);
  bool ok = true;
  int total = 0, failed = 0;
  for (const FixtureRun& r : runs) {
    ok = ok && r.exit_code == 0 && !r.verdicts.empty();
    if (r.exit_code != 0) std::printf("\nFAILED %s: the suites exited %d (see %s)\n", r.fixture.c_str(), r.exit_code,
                                      r.log_path.c_str());
    for (const Verdict& v : r.verdicts) {
      ++total;
      if (!v.passed) {
        ++failed;
        ok = false;
        std::printf("\nFAILED %s %s [%s] %s\n%s\n", r.fixture.c_str(), v.check.c_str(), v.arm.c_str(), v.test.c_str(),
                    v.message.c_str());
      }
    }
  }
  print_skipped(runs);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\nverdicts: %d, failed: %d, time %.1f s: %s\n", total, failed, secs, ok ? "OK" : "FAILED");
  if (!o.json_path.empty()) {
    const GateSummary g{ok, started_at, secs, arms, runs};
    std::ofstream(o.json_path) << gate_to_json(g).dump(1) << "\n";
  }
  if (!o.junit_path.empty()) write_junit(o.junit_path, runs);
  return ok ? 0 : 1;
}

CLI::App* add_gate_command(CLI::App& app, GateOptions& go) {
  CLI::App* gate = app.add_subcommand("gate", "run every gate on every fixture of the device (CPU: all; cuda: those whose ranks fit the GPUs) and print the verdict table");
  gate->add_option("--fixture", go.fixtures, "fixtures (repeatable or a,b list; default: every CPU fixture)")
      ->delimiter(',');
  gate->add_option("--arm", go.arms, fmt::format("candidate arms (repeatable or a,b list; default: {})",
                                                  fmt::join(default_candidates(), ", ")))
      ->delimiter(',');
  gate->add_option("--check", go.checks, "gates (repeatable or a,b list; default: all)")->delimiter(',');
  gate->add_option("--iters", go.iters,
                   "iterations per scenario (default: each gate's own); > every selected fixture's LR warmup, and "
                   "4..200 when lr_schedule runs off dp64");
  gate->add_option("--json", go.json_path, "write the verdicts as JSON (checked writable first)");
  gate->add_option("--junit", go.junit_path, "write the verdicts as JUnit XML (checked writable first)");
  gate->add_option("--suites-exe", go.suites_exe,
                   "the gate suites executable (default: beside loopgate; yours, with registered arms and fixtures: "
                   "docs/custom-arms.md)");
  gate->add_option("--mpiexec", go.mpiexec, "the MPI launcher: a path or a program on PATH (default mpiexec)");
  gate->add_option("--progress-timeout", go.progress_timeout,
                   "seconds a test may go without progress on a rank before it fails and the fixture relaunches "
                   "for the tests not yet run, refusing the scenario it hung in (the tests that share it fail at "
                   "once), > 0 (default 60)");
  gate->add_option("--device", go.device,
                   "cpu | cuda (cuda: every fixture whose ranks fit the visible GPUs, one rank per GPU, NCCL and bf16, "
                   "plus the GPU-only checks ledger_cupti and capture_probe; default cpu)");
  gate->add_option("--gpu-loop-exe", go.gpu_loop_exe,
                   "the GPU-only suites executable (--device cuda; default: suites/gpu/loopgate_gpu_loop beside the "
                   "gate suites)");
  gate->add_option("--shards", go.shards,
                   "processes sharing each fixture's gate suites, round-robin over its tests, 0-64 (default 0 = auto: 1 "
                   "on CPU; --device cuda: one per block of ranks-many visible GPUs, at most 8, side by side; more "
                   "share the GPUs)");
  gate->add_option("--jobs", go.jobs, "fixtures of at most 2 ranks run this many at a time, >= 1 (default 1: on 2 cores, two jobs' waiting ranks spin against each other)");
  return gate;
}

}  // namespace loopgate
