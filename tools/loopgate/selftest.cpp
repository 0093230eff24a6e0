// `loopgate selftest`: the gates' power, measured. Every planted defect of the catalogue (fixtures/defects/: one
// loop change handed into the trainer as a mutation, per property a gate claims) runs through the gate that must reject
// it, as an ordinary candidate arm — the same tests a user's arm meets, not the GatePower tests — on the
// smallest fixture that shows it; the defects of one fixture share one launch (each judged by its own tests only).
// Prints, per defect, whether it was rejected, by which check and test, and its launch's time; the mutation score
// is the share rejected. A defect whose ranks end in different collectives hangs, and counts as rejected when the
// progress watchdog fails its test (--progress-timeout, 10 s here); it gets a launch of its own, which ends at that
// abort (the gate would relaunch for the defect's other tests, which only refuse the scenario it hung in). A defect's
// tests after its first failing one are skipped (--lg_skip_rejected_arms). GPU-only defects run with --device cuda
// and are listed as not run otherwise, as are, on a GPU, those whose fixture needs more GPUs than are visible. Then
// (--section tools or all) the tools' known-answer sets (selftest_tools.h). Exit 0 at 100 % and every tool set
// passing (or not runnable here, said so), 1 otherwise, 2 on bad input.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "fixtures/fixtures.h"
#include "tools/loopgate/validate.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/selftest_tools.h"
#include "tools/loopgate/verdicts.h"
#include "trainer/common/error.h"
#include "fixtures/defects/catalogue.h"
#include "trainer/loop/arms.h"

namespace loopgate {
namespace {

struct DefectResult {
  const PlantedDefect* defect;
  std::string fixture, outcome;  // outcome: "REJECTED", "ACCEPTED!", "not run (GPU only)"
  std::string by;                // the first failing test of this arm, and how
  double seconds = 0;
};

// GoogleTest parameter names cannot hold '-' (fixtures/scenarios.h param_name, without the harness it needs).
std::string test_param(std::string arm) {
  for (char& c : arm)
    if (c == '-') c = '_';
  return arm;
}

std::string suite_of_check(const std::string& check) {
  for (const auto& [c, suite] : gate_checks())
    if (c == check) return suite;
  return "";
}

// The smallest fixture that shows a defect.
std::string defect_fixture(const PlantedDefect& d) { return d.fixture.empty() ? "single" : d.fixture; }

// Whether a defect can run here: a GPU-only one needs --device cuda, and on a GPU its fixture's ranks must fit.
std::string why_not_run(const PlantedDefect& d, const SelftestOptions& o, const std::string& fixture, int gpus) {
  if (d.gpu_only && o.device != "cuda") return "not run (GPU only)";
  if (d.cpu_only && o.device == "cuda") return "not run (CPU emulation only)";
  if (o.device == "cuda" && find_fixture(fixture).world > gpus)
    return fmt::format("not run (needs {} GPUs)", find_fixture(fixture).world);
  return "";
}

// The defects of one launch: every runnable defect of a fixture shares one launch of the suites (its scenarios'
// baseline runs are shared too), but for a defect whose ranks end in different collectives, which hangs until the
// watchdog aborts the launch: it gets a launch of its own.
struct Batch {
  std::string fixture;
  std::vector<const PlantedDefect*> defects;
};

std::vector<Batch> batches(const std::vector<const PlantedDefect*>& runnable) {
  std::vector<Batch> out;
  for (const PlantedDefect* d : runnable) {
    const std::string fx = defect_fixture(*d);
    auto shared = std::find_if(out.begin(), out.end(), [&](const Batch& b) {
      return b.fixture == fx && !d->hangs && !b.defects.front()->hangs;
    });
    if (shared == out.end()) {
      out.push_back({fx, {d}});
    } else {
      shared->defects.push_back(d);
    }
  }
  return out;
}

// Runs one batch; each defect's own tests (its TEST_P instances of the check that must reject it, also of suites
// that share the check's prefix) decide its outcome. `seconds`: the launch's, shared by its defects.
std::vector<DefectResult> run_batch(const Batch& b, const SelftestOptions& o, const std::string& dir) {
  GateOptions g;
  g.suites_exe = o.suites_exe;
  g.gpu_loop_exe = o.gpu_loop_exe;
  g.device = o.device;
  g.mpiexec = o.mpiexec;
  g.progress_timeout = o.progress_timeout;
  g.echo = false;
  // A hanging defect launches alone, and the test its launch aborted in is its verdict: the tests after it would
  // only fail again on the scenario it hung in, at a relaunch's cost (on pp2tp2dp2 two launches of 8 ranks).
  g.relaunch_after_abort = !b.defects.front()->hangs;
  // A defect's first failing test is its verdict: its later tests are skipped (about half of the single launch's
  // scenario runs).
  g.skip_rejected_arms = true;
  for (const PlantedDefect* d : b.defects) {
    g.arms.push_back(d->name);
    if (std::find(g.checks.begin(), g.checks.end(), d->rejected_by) == g.checks.end())
      g.checks.push_back(d->rejected_by);
    g.filter += fmt::format("{}Arms/{}*/{}", g.filter.empty() ? "" : ":", suite_of_check(d->rejected_by),
                            test_param(d->name));
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string sub = dir + "/" + b.fixture + "_" + b.defects.front()->name;
  mkdir(sub.c_str(), 0755);
  const std::vector<FixtureRun> runs = run_gate_fixtures(g, {find_fixture(b.fixture)}, sub);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<DefectResult> out;
  for (const PlantedDefect* d : b.defects) {
    DefectResult r{d, b.fixture, "", "", seconds};
    int own = 0;
    for (const FixtureRun& run : runs)
      for (const Verdict& v : run.verdicts) {
        if (v.arm != d->name) continue;
        ++own;
        if (v.passed || !r.by.empty()) continue;
        const bool hung = v.message.find("made no progress") != std::string::npos;
        // The collective record's line (gate_launch.cpp): where the ranks parted.
        const size_t at = v.message.rfind("collectives: ", 0) == 0 ? 0 : v.message.find("\ncollectives: ");
        const std::string parted = at == std::string::npos
                                       ? ""
                                       : "; " + v.message.substr(at + (at ? 1 : 0),
                                                                 v.message.find('\n', at + 1) - at - (at ? 1 : 0));
        // A rank that died says nothing itself: the launcher's line names it.
        const size_t died = v.message.find("noticed that process rank");
        const std::string death =
            died == std::string::npos
                ? ""
                : " (a rank died: " + v.message.substr(died, v.message.find('\n', died) - died) + ")";
        r.by = fmt::format("{}: {}{}", v.check, v.test,
                           hung ? " (hang, failed by the progress watchdog" + parted + ")" : death);
      }
    r.outcome = !r.by.empty() ? "REJECTED" : own == 0 ? "NO TEST RAN" : "ACCEPTED!";
    if (own == 0) r.by = "no test of this arm ran (see " + runs.at(0).log_path + ")";
    out.push_back(r);
  }
  return out;
}

// The planted defects, each through its gate (a row each), and the mutation score; false below 100 %.
bool run_defects(const SelftestOptions& o, const std::vector<const PlantedDefect*>& defects, int gpus, const std::string& dir,
                 nlohmann::json& j) {
  std::printf("loopgate selftest: %zu planted defects, each through the gate that must reject it; logs in %s\n",
              defects.size(), dir.c_str());
  std::printf("%-34s %-10s %-14s %-10s %7s  %s\n", "defect", "fixture", "gate", "verdict", "seconds", "rejected by");
  // Which defects can run here, then one launch per batch; printed in catalogue order.
  std::map<const PlantedDefect*, DefectResult> by_defect;
  std::vector<const PlantedDefect*> runnable_defects;
  for (const PlantedDefect* d : defects) {
    DefectResult r{d, defect_fixture(*d), why_not_run(*d, o, defect_fixture(*d), gpus), "", 0};
    if (r.outcome.empty()) {
      runnable_defects.push_back(d);
    } else {
      r.by = d->gpu_only   ? "suites/gpu/test_gpu_loop.cpp on a GPU runner (--device cuda)"
             : d->cpu_only ? "the CPU selftest (--device cpu): a GPU's one stream rules it out"
                           : "a runner with more GPUs";
      by_defect.emplace(d, r);
    }
  }
  const std::vector<Batch> launches = batches(runnable_defects);
  for (const Batch& b : launches)
    for (const DefectResult& r : run_batch(b, o, dir)) by_defect.emplace(r.defect, r);
  int rejected = 0;
  const int runnable = static_cast<int>(runnable_defects.size());
  j["defects"] = nlohmann::json::array();
  for (const PlantedDefect* d : defects) {
    const DefectResult& r = by_defect.at(d);
    rejected += r.outcome == "REJECTED";
    std::printf("%-34s %-10s %-14s %-10s %7.1f  %s\n", d->name.c_str(), r.fixture.c_str(), d->rejected_by.c_str(),
                r.outcome.c_str(), r.seconds, r.by.c_str());
    j["defects"].push_back({{"defect", d->name}, {"what", d->description}, {"fixture", r.fixture},
                            {"gate", d->rejected_by}, {"verdict", r.outcome}, {"by", r.by}, {"seconds", r.seconds}});
  }
  std::printf("(%zu launches; a defect's seconds are its launch's, shared by the defects of that fixture)\n",
              launches.size());
  const double score = runnable ? 100.0 * rejected / runnable : 0.0;
  std::printf("\nmutation score: %d of %d runnable defects rejected (%.0f %%); %zu not run here (GPU only, CPU "
              "emulation only, or more GPUs than visible): %s\n", rejected, runnable, score, defects.size() - static_cast<size_t>(runnable),
              rejected == runnable ? "OK" : "FAILED");
  j["rejected"] = rejected;
  j["runnable"] = runnable;
  j["score_percent"] = score;
  return rejected == runnable;
}

// The tools' known-answer sets (selftest_tools.h), a row each; false when one failed.
bool run_tools(const SelftestOptions& o, const std::string& dir, nlohmann::json& j) {
  std::printf("\nloopgate selftest: the tools' known answers\n%-48s %-8s %7s  %s\n", "set", "verdict", "seconds",
              "detail");
  bool ok = true;
  j["tools"] = nlohmann::json::array();
  for (const ToolSetResult& r : run_tool_sets({o.unit_exe, o.self_exe, o.mpiexec, o.source_dir, dir})) {
    std::printf("%-48s %-8s %7.1f  %s\n", r.set.c_str(), r.verdict.c_str(), r.seconds, r.detail.c_str());
    ok = ok && r.verdict != "FAIL";
    j["tools"].push_back({{"set", r.set}, {"verdict", r.verdict}, {"detail", r.detail}, {"seconds", r.seconds}});
  }
  std::printf("tools: %s\n", ok ? "OK (a set not run is listed as not run, not counted as passed)" : "FAILED");
  return ok;
}

}  // namespace

int cmd_selftest(const SelftestOptions& o_in) {
  SelftestOptions o = o_in;
  std::vector<const PlantedDefect*> defects;
  if (o.defects.empty()) {
    for (const PlantedDefect& d : planted_defects()) defects.push_back(&d);
  } else {
    for (const std::string& name : o.defects) {
      find_arm(name);  // InputError naming the known arms for an unknown one
      defects.push_back(&find_planted_defect(name));
    }
  }
  LG_INPUT_CHECK(o.progress_timeout > 0, "--progress-timeout must be > 0 seconds (got {})", o.progress_timeout);
  LG_INPUT_CHECK(o.device == "cpu" || o.device == "cuda", "--device '{}': must be cpu or cuda", o.device);
  LG_INPUT_CHECK(o.section == "defects" || o.section == "tools" || o.section == "all",
                 "--section '{}': must be defects, tools or all", o.section);
  const int gpus = o.device == "cuda" ? visible_gpu_count() : 0;  // InputError where there is no GPU tier
  struct stat st;
  LG_INPUT_CHECK(stat(o.suites_exe.c_str(), &st) == 0, "gate suites executable not found at {}", o.suites_exe);
  if (stop_after_validation()) return 0;
  std::unique_ptr<std::ofstream> json_out;
  if (!o.json_path.empty()) {
    json_out = std::make_unique<std::ofstream>(o.json_path);
    LG_INPUT_CHECK(json_out->good(), "--json {}: cannot write the file", o.json_path);
  }
  char tmpl[] = "/tmp/loopgate-selftest-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  nlohmann::json j = nlohmann::json::object();
  bool ok = true;
  if (o.section != "tools") ok = run_defects(o, defects, gpus, dir, j) && ok;
  if (o.section != "defects") ok = run_tools(o, dir, j) && ok;
  if (json_out) *json_out << j.dump(1) << "\n";
  return ok ? 0 : 1;
}

CLI::App* add_selftest_command(CLI::App& app, SelftestOptions& so) {
  CLI::App* selftest = app.add_subcommand("selftest", "run every planted defect through the gate that must reject it");
  selftest->add_option("--defect", so.defects, "defects (repeatable or a,b list; default: the whole catalogue)")
      ->delimiter(',');
  selftest->add_option("--progress-timeout", so.progress_timeout,
                       "seconds a stuck rank waits before the watchdog fails a hanging defect's test, > 0 (default 10)");
  selftest->add_option("--json", so.json_path, "write the results as JSON");
  selftest->add_option("--section", so.section,
                       "defects | tools | all (default all): the planted defects, the tools' known-answer sets "
                       "(compare, ab, report, the generated bad-input rows), or both");
  selftest->add_option("--mpiexec", so.mpiexec, "the MPI launcher: a path or a program on PATH (default mpiexec)");
  selftest->add_option("--device", so.device,
                       "cpu | cuda (cuda: the GPU tier, GPU-only defects included; a defect whose fixture needs more "
                       "GPUs than are visible is listed as not run; default cpu)");
  return selftest;
}

}  // namespace loopgate
