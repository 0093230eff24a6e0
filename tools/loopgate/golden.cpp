// `loopgate golden --check | --update`: the only writer of golden/ (golden/README.md).
//   --update  writes lr_sequences.json from the scheduler port, then per fixture launches one MPI job
//             (`mpiexec -n N <self> golden --capture TMP --fixture F`) that runs the baseline golden-value run
//             and every budget arm's sync scenarios, and converts what it wrote into
//             <fixture>/golden_values_cpu.json, <fixture>/environment_cpu.json and sync_budgets.json.
//   --check   recomputes the LR sequences and compares their bits; per fixture launches
//             `mpiexec -n N <self> run --fixture F --arm baseline --iters K --log-interval 1 --trace TMP` and
//             compares with the golden values (exact bits where the recorded environment matches, Megatron's
//             tolerances otherwise); checks that sync_budgets.json covers the fixture. Exit 0 pass, 1 fail.
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "fixtures/fixtures.h"
#include "fixtures/golden.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/process.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/error.h"
#include "trainer/measure/ledger.h"

namespace loopgate {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string make_tmp_dir() {
  char tmpl[] = "/tmp/loopgate-golden-XXXXXX";
  char* d = mkdtemp(tmpl);
  LG_INPUT_CHECK(d != nullptr, "cannot create a temporary directory");
  return d;
}

int launch(const std::string& cmd) {
  std::printf("+ %s\n", cmd.c_str());
  std::fflush(stdout);
  ProcessSpec spec;
  spec.shell = cmd;
  return run_process(spec);
}

// Inside the MPI job: the baseline golden run and every budget arm's sync scenarios, written to `dir` by rank 0.
int capture(const GoldenOptions& o) {
  int rank = 0, size = 1;
  cli_mpi_init(&rank, &size);
  int code = 0;
  try {
    LG_INPUT_CHECK(o.fixtures.size() == 1, "golden --capture needs exactly one --fixture");
    const std::string& fx = o.fixtures[0];
    check_world(fixture_config(fx), size);
    RunResult base = run_arm(on_device(golden_run_config(fx), o.device), "baseline", MPI_COMM_WORLD);
    Trace bt = gather_trace(base, MPI_COMM_WORLD);
    if (rank == 0) write_trace(bt, o.capture_dir + "/golden_trace.json");
    json scenarios = json::object();
    // Sync budgets are host reads per site, the same on every device: made on the CPU tier only.
    for (const SyncScenario& s : o.device == "cpu" ? sync_scenarios(fx) : std::vector<SyncScenario>{}) {
      json arms = json::object(), launches = json::object();
      for (const std::string& arm : budget_arms()) {
        RunResult r = run_arm(sync_scenario_config(fx, s), arm, MPI_COMM_WORLD);
        const Trace t = gather_trace(r, MPI_COMM_WORLD);
        arms[arm] = budget_from_trace(t, s.log_interval);
        launches[arm] = budget_from_trace(t, s.log_interval, &IterationRecord::launches_per_site);
      }
      // Operator counts depend on LibTorch's decompositions: the launch budget holds where it was made.
      scenarios[s.key] = {{"log_interval", s.log_interval}, {"iters", s.iters},
                          {"exit_duration_in_mins_set", s.exit_vote}, {"arms", arms},
                          {"launches", {{"torch_version", environment_info().at("torch_version")}, {"arms", launches}}}};
    }
    if (rank == 0) write_json_file(o.capture_dir + "/budgets.json", scenarios);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loopgate golden --capture: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}

// The fixtures named, or every fixture; on the GPU tier by default those whose ranks fit the visible GPUs (one
// rank per GPU), each one left out named (validate_golden_options refused a named one that does not fit).
std::vector<std::string> selected_fixtures(const GoldenOptions& o) {
  if (!o.fixtures.empty()) return o.fixtures;
  std::vector<Fixture> fixtures = all_fixtures();
  if (o.device == "cuda") fixtures = fixtures_that_fit(fixtures, visible_gpu_count(), "golden");
  std::vector<std::string> names;
  for (const Fixture& f : fixtures) names.push_back(f.name);
  return names;
}

// LR sequences and sync budgets: host-side facts, made on the CPU tier. Golden values: per device.
void update_host_files(const std::string& g) {
  write_json_file(g + "/lr_sequences.json", make_lr_golden());
  std::printf("wrote %s/lr_sequences.json (%zu cases x global batches", g.c_str(), lr_cases().size());
  for (int64_t b : fixture_global_batches()) std::printf(" %lld", static_cast<long long>(b));
  std::printf(")\n");
}

// The golden run of `fx` (the baseline, golden's iterations, log interval 1) as a `loopgate run` job, plus `extra`.
std::string golden_run_command(const GoldenOptions& o, const std::string& fx, const std::string& extra) {
  return fmt::format("{} -n {} {} run --fixture {} --arm baseline --iters {} --log-interval 1 --quiet --device {} {}",
                     o.mpiexec, find_fixture(fx).world, o.self_exe, fx, golden_iters(fx), o.device, extra);
}

int update(const GoldenOptions& o) {
  const std::string& g = o.golden_dir;
  const bool cpu = o.device == "cpu";
  fs::create_directories(g);
  if (cpu) update_host_files(g);
  json budgets = fs::exists(g + "/sync_budgets.json") ? read_json_file(g + "/sync_budgets.json") : json::object();
  budgets["about"] =
      "max host reads per site per iteration (max over ranks), per fixture / scenario / arm / iteration category "
      "(first_iteration, log, nonlog); a site absent = 0 allowed; under 'launches' the same for operators "
      "dispatched (the CPU launch proxy, valid for the LibTorch version named); written only by `loopgate golden "
      "--update`";
  for (const std::string& fx : selected_fixtures(o)) {
    std::string tmp = make_tmp_dir();
    int rc = launch(fmt::format("{} -n {} {} golden --capture {} --fixture {} --device {}", o.mpiexec,
                                find_fixture(fx).world, o.self_exe, tmp, fx, o.device));
    if (rc != 0) {
      std::fprintf(stderr, "loopgate golden --update: the capture job for %s failed (exit %d); golden/ for it unchanged\n",
                   fx.c_str(), rc);
      return 1;
    }
    Trace t = read_trace(tmp + "/golden_trace.json");
    // The same run with digests (the same bits: EquivalenceDigests), whose first iterations a failing golden check
    // is localized against.
    rc = launch(golden_run_command(o, fx, "--digests --trace " + tmp + "/digests_trace.json"));
    if (rc != 0) {
      std::fprintf(stderr, "loopgate golden --update: the digests run for %s failed (exit %d); golden/ for it unchanged\n",
                   fx.c_str(), rc);
      return 1;
    }
    const Trace digests = read_trace(tmp + "/digests_trace.json");
    fs::create_directories(g + "/" + fx);
    write_json_file(golden_file(g, fx, "golden_values", o.device), golden_values_from_trace(t));
    write_json_file(golden_file(g, fx, "environment", o.device), environment_json(t.environment));
    write_json_file(golden_file(g, fx, "digests", o.device), golden_digests_from_trace(digests));
    if (cpu) {
      budgets["fixtures"][fx] = {{"scenarios", read_json_file(tmp + "/budgets.json")}};
      write_json_file(g + "/sync_budgets.json", budgets);
    }
    remove_tree(tmp);  // not fs::remove_all (golden_files.h)
    std::printf("wrote %s, %s, %s%s\n", golden_file(g, fx, "golden_values", o.device).c_str(),
                golden_file(g, fx, "environment", o.device).c_str(), golden_file(g, fx, "digests", o.device).c_str(),
                cpu ? fmt::format(", {}/sync_budgets.json[{}]", g, fx).c_str() : "");
  }
  return 0;
}

int check(const GoldenOptions& o) {
  const std::string& g = o.golden_dir;
  int failed = 0;
  // LR sequences: the port today vs the file, bit for bit.
  json lr = read_json_file(g + "/lr_sequences.json");
  int lr_bad = 0;
  for (const LrCase& c : lr_cases()) {
    for (int64_t gbs : fixture_global_batches()) {
      std::vector<double> want = golden_lr_sequence(lr, c.name, gbs), got = expected_lr_sequence(c, gbs);
      for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
        if (!same_bits(want[i], got[i]) && lr_bad++ < 8)
          std::printf("FAIL lr_sequences %s gbs %lld iteration %zu: golden %s, scheduler port %s\n", c.name.c_str(),
                      static_cast<long long>(gbs), i + 1, hex(want[i]).c_str(), hex(got[i]).c_str());
      }
      if (want.size() != got.size()) ++lr_bad;
    }
  }
  std::printf("%s lr_sequences.json: %zu cases, exact bits (%d differences)\n", lr_bad ? "FAIL" : "ok  ",
              lr_cases().size(), lr_bad);
  failed += lr_bad != 0;
  json budgets = read_json_file(g + "/sync_budgets.json");
  for (const std::string& fx : selected_fixtures(o)) {
    // Sync budgets: every scenario and arm present, every site name known.
    int bbad = 0;
    for (const SyncScenario& s : sync_scenarios(fx)) {
      for (const std::string& arm : budget_arms()) {
        const json* budget = find_sync_budget(budgets, fx, s.key, arm);
        if (!budget) {
          std::printf("FAIL sync_budgets %s %s %s: missing\n", fx.c_str(), s.key.c_str(), arm.c_str());
          ++bbad;
          continue;
        }
        for (const std::string& site : budget_sites(*budget))
          if (!try_parse_site(site)) {
            std::printf("FAIL sync_budgets %s %s %s: unknown site '%s'\n", fx.c_str(), s.key.c_str(), arm.c_str(),
                        site.c_str());
            ++bbad;
          }
      }
    }
    std::printf("%s sync_budgets.json[%s]\n", bbad ? "FAIL" : "ok  ", fx.c_str());
    failed += bbad != 0;

    // Golden values: the baseline run now vs the file.
    std::string tmp = make_tmp_dir();
    int rc = launch(golden_run_command(o, fx, "--trace " + tmp + "/trace.json"));
    if (rc != 0) {
      std::printf("FAIL golden values %s: the baseline run exited %d\n", fx.c_str(), rc);
      ++failed;
      continue;
    }
    Trace t = read_trace(tmp + "/trace.json");
    remove_tree(tmp);  // not fs::remove_all (golden_files.h)
    GoldenCheck gc = check_golden_values(read_json_file(golden_file(g, fx, "golden_values", o.device)),
                                         read_json_file(golden_file(g, fx, "environment", o.device)),
                                         golden_values_from_trace(t), t.environment);
    // GPU bits belong to one environment: another one is refused (a failure of the check, never a pass).
    const bool refused = o.device == "cuda" && !gc.environment_matches;
    std::printf("%s golden values %s on %s (environment %s)\n", gc.failures.empty() && !refused ? "ok  " : "FAIL",
                fx.c_str(), o.device.c_str(),
                refused                  ? "differs: a bit-exact comparison across GPU environments is refused"
                : gc.environment_matches ? "matches: exact bits demanded"
                                         : "differs: Megatron tolerances");
    for (const std::string& d : gc.env_differences) std::printf("     environment %s\n", d.c_str());
    for (const std::string& n : gc.notes) std::printf("     %s\n", n.c_str());
    for (const std::string& f : gc.failures) std::printf("     FAIL %s\n", f.c_str());
    failed += !gc.failures.empty() || refused;

    // Golden digests: readable, and on the CPU tier present (the GPU tier's are recorded where a runner made them).
    const std::string dpath = golden_file(g, fx, "digests", o.device);
    if (o.device == "cuda" && !fs::exists(dpath)) {
      std::printf("     no %s: a failing GPU golden check here is not localized\n", dpath.c_str());
      continue;
    }
    std::string derr;
    size_t records = 0;
    try {
      records = trace_from_golden_digests(read_json_file(dpath)).records.size();
    } catch (const InputError& e) {
      derr = e.what();
    }
    std::printf("%s golden digests %s: %s\n", derr.empty() && records > 0 ? "ok  " : "FAIL", fx.c_str(),
                derr.empty() ? fmt::format("{} rank-iteration records", records).c_str() : derr.c_str());
    failed += !derr.empty() || records == 0;
  }
  std::printf("golden --check: %s\n", failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}

}  // namespace

int cmd_golden(const GoldenOptions& o) {
  validate_golden_options(o);  // before --update writes anything (validate.h)
  if (stop_after_validation()) return 0;
  set_mpi_launch_env();
  if (!o.capture_dir.empty()) return capture(o);
  return o.update ? update(o) : check(o);
}

CLI::App* add_golden_command(CLI::App& app, GoldenOptions& gd) {
  CLI::App* golden = app.add_subcommand("golden", "compare with golden values (--check) or rewrite them (--update)");
  golden->add_flag("--check", gd.check, "compare the LR sequences, sync budgets and golden values (exactly one of "
                                        "--check, --update)");
  golden->add_flag("--update", gd.update, "rewrite them (the only writer of golden/)");
  golden->add_option("--fixture", gd.fixtures, "fixtures (repeatable or a,b list; default: every CPU fixture)")
      ->delimiter(',');
  gd.golden_dir = default_golden_dir();  // the installed or the source tree's golden/, wherever loopgate is run from
  golden->add_option("--golden-dir", gd.golden_dir,
                     "golden values folder (default: $LOOPGATE_GOLDEN_DIR, the installed share/loopgate/golden, or the "
                     "source tree's golden/); --check: its files must exist, --update: writable");
  golden->add_option("--device", gd.device,
                     "cpu | cuda (cuda: the GPU tier's golden values, <fixture>/golden_values_cuda.json and "
                     "environment_cuda.json, for the fixtures whose ranks fit the visible GPUs; LR sequences and sync "
                     "budgets are the CPU's)");
  golden->add_option("--mpiexec", gd.mpiexec, "the MPI launcher: a path or a program on PATH (default mpiexec)");
  golden->add_option("--capture", gd.capture_dir)->group("");  // internal: the per-fixture MPI worker of --update
  return golden;
}

}  // namespace loopgate
