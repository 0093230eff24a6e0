// `loopgate gate`: the main job. It checks its input against what the suites executable knows, runs every
// fixture's launch (gate_launch.cpp: the suites under mpiexec, relaunched after an abort), and prints the verdict
// table (fixture x check x arm), nccl-tests style: header once, one row per (fixture, check), footer with totals
// and OK/FAILED; then the JSON and JUnit. Exit: 0 pass, 1 a gate failed, 2 bad input.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include "fixtures/fixtures.h"
#include "fixtures/golden.h"
#include "fixtures/loop_checks.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/launch_plan.h"
#include "tools/loopgate/paths.h"
#include "tools/loopgate/validate.h"
#include "tools/loopgate/verdicts.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

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
  throw InputError(fmt::format("--fixture: unknown fixture '{}' (known: {})", name, fmt::join(known, ", ")));
}

void check_arm_in(const SuitesRegistry& r, const std::string& name) {
  if (std::find(r.arms.begin(), r.arms.end(), name) != r.arms.end()) return;
  throw InputError(fmt::format("--arm: unknown arm '{}' (known: {})", name, fmt::join(r.arms, ", ")));
}

}  // namespace

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
  std::printf("loopgate gate: fixtures %zu, candidate arms %s; logs in %s\n", fixtures.size(),
              fmt::format("{}", fmt::join(arms, ",")).c_str(), dir.c_str());
  const std::string started_at = utc_now();
  auto start = std::chrono::steady_clock::now();
  std::vector<FixtureRun> runs = run_gate_fixtures(o, fixtures, dir);
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
                   "processes sharing each fixture's gate suites, each arm's tests and each other suite in one of "
                   "them, 0-64 (default 0 = auto: on CPU the cores over the fixture's ranks, at most 8; --device "
                   "cuda: one per block of ranks-many visible GPUs, at most 8, side by side; more share the GPUs)");
  gate->add_option("--cpus", go.cpus,
                   "cores the CPU launches may keep busy: fixtures and shards run side by side while their ranks fit, "
                   "a larger one alone, 0-1024 (default 0 = this process's cores)");
  return gate;
}

}  // namespace loopgate
