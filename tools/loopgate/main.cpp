// loopgate: the command line of the loop-change gate.
//   mpirun -np N loopgate run --fixture F --arm A [...]   one arm on one fixture: Megatron log lines, sync table, Trace
//   loopgate gate [--fixture F ...] [--arm A ...]          every gate on every CPU fixture: verdict table, exit 0/1/2
//   loopgate golden --check | --update                    compare with / rewrite golden/ (the only writer)
//   loopgate ab A B                                        step time of two runs' files: medians, shift, Mann-Whitney
//   loopgate compare --a A1 [A2..] --b B1 [B2..]           did the change keep the numbers (Megatron logs, Traces)
//   loopgate report --gate gate.json [--out report.html]  one self-contained HTML page from a gate run
//   loopgate syncs [flags] -- CMD...                       host syncs per iteration per Python site of a CUDA program
//   loopgate pair --baseline CMD --candidate CMD           the gate for two real commands: alternating runs, rows
// Flags keep Megatron's names where Megatron has the flag. Bad input: one line on stderr, exit 2, before any work
// (run_flags.h, validate.h, paths.h; docs/cli.md). `loopgate cli-reference` prints every flag as Markdown.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "fixtures/defects/catalogue.h"
#include "fixtures/fixtures.h"
#include "fixtures/golden.h"
#include "fixtures/loop_checks.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/run_flags.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/report.h"
#include "tools/loopgate/pair.h"
#include "tools/loopgate/syncs.h"
#include "trainer/common/error.h"

namespace loopgate {

int input_error(const std::string& what) {
  if (is_rank_zero_env()) std::fprintf(stderr, "loopgate: error: %s\n", what.c_str());
  return 2;
}

namespace {

std::string self_path(const char* argv0) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  buf[n] = '\0';
  return buf;
}

void add_ab_flags(CLI::App* cmd, std::string& json_path, double& alpha, StepTimeOptions& step) {
  cmd->add_option("--json", json_path, "write the report as JSON to FILE (checked writable first)");
  cmd->add_option("--alpha", alpha, "significance level of the Mann-Whitney test, in (0, 1) (default 0.05)");
  cmd->add_option("--window", step.window, "iterations per step-time window, >= 0 (default 0: one window per log line)");
  cmd->add_option("--warmup-windows", step.warmup_windows, "windows dropped at the start of each run, >= 0 (default 1)");
  cmd->add_option("--time-source", step.source,
                  "auto (timestamps when every line has one, else the elapsed field) | timestamps | elapsed");
}

// An option given an empty value (--trace '', --iters "") reads as "not given" and would be dropped silently.
void check_no_empty_values(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* opt : sub->get_options())
      for (const std::string& v : opt->results())
        LG_INPUT_CHECK(!v.empty(), "{} '': needs a value", opt->get_name());
}

// `loopgate cli-reference`: every subcommand's options as Markdown tables, from these CLI11 definitions
// (docs/cli.md embeds the output; CTest cli_reference_in_docs keeps them in step).
void print_cli_reference(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    std::printf("### loopgate %s\n\n%s\n\n| option | value | meaning and range |\n|---|---|---|\n",
                sub->get_name().c_str(), sub->get_description().c_str());
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->get_group().empty() || opt->get_name() == "--help") continue;  // hidden (internal) options
      std::string names;
      for (const std::string& n : opt->get_lnames()) names += (names.empty() ? "`--" : ", `--") + n + "`";
      for (const std::string& n : opt->get_snames()) names += (names.empty() ? "`-" : ", `-") + n + "`";
      if (names.empty()) names = "`" + opt->get_name() + "` (positional)";
      std::string value = opt->get_expected_min() == 0 ? "flag" : opt->get_type_name();
      if (opt->get_expected_max() > 1) value += " ...";
      std::string desc;
      for (char ch : opt->get_description()) desc += ch == '|' ? std::string("\\|") : std::string(1, ch);
      if (opt->get_required()) desc += " (required)";
      std::printf("| %s | %s | %s |\n", names.c_str(), value.c_str(), desc.c_str());
    }
    std::printf("\n");
  }
}

}  // namespace
}  // namespace loopgate

int main(int argc, char** argv) {
  using namespace loopgate;
  register_planted_defects();  // `--arm defect-...` and the selftest find them
  CLI::App app{"loopgate: the acceptance gate for distributed training-loop changes"};
  app.require_subcommand(1);
  RunFlags rf;
  CLI::App* run = app.add_subcommand("run", "run one arm on one fixture (inside mpirun)");
  add_run_flags(run, rf);
  add_gpu_flags(run, gpu_flags());

  GateOptions go;
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

  GoldenOptions gd;
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

  AbOptions ab;
  AbPhaseOptions abp;
  RunFlags abrf;
  std::vector<std::string> ab_arms;
  CLI::App* ab_cmd = app.add_subcommand(
      "ab", "step time A vs B: from two runs' files (Megatron logs, Traces, golden values), or, inside mpirun with "
            "--arms A,B, two arms alternating in phases over one model");
  ab_cmd->add_option("a", ab.a, "run A: Megatron log, loopgate Trace or golden-values JSON (readable)");
  ab_cmd->add_option("b", ab.b, "run B (readable)");
  add_ab_flags(ab_cmd, ab.json_path, ab.alpha, ab.step);
  ab_cmd->add_option("--arms", ab_arms, "in-process mode: the two arms A,B that alternate (inside mpirun); NAME:bare "
                                       "is NAME with loopgate's bookkeeping off (A,A:bare prices it), NAME:digests NAME taking --digests "
                                       "(A,A:digests prices them)")
      ->delimiter(',');
  ab_cmd->add_option("--phases", abp.phases, "in-process: phases per arm, >= 3 (the first is warm-up; default 6)");
  ab_cmd->add_option("--phase-iters", abp.phase_iters,
                     "in-process: iterations per phase, >= 1, a multiple of --log-interval (default 20)");
  add_run_flags(ab_cmd, abrf);
  add_gpu_flags(ab_cmd, gpu_flags());

  CompareOptions cmp;
  CLI::App* compare = app.add_subcommand("compare", "did the change keep the numbers: verdict rows over runs of A and B");
  compare->add_option("--a", cmp.a, "runs of A (baseline): Megatron logs, Traces or golden values")->required()->expected(1, -1);
  compare->add_option("--b", cmp.b, "runs of B (candidate)")->required()->expected(1, -1);
  compare->add_option("--early", cmp.early, "lm loss and params norm identical at iterations 1..K, K >= 1 (default 2)");
  add_ab_flags(compare, cmp.json_path, cmp.alpha, cmp.step);
  ReportOptions ro;
  CLI::App* report = app.add_subcommand("report", "write one self-contained HTML page from `loopgate gate --json` output");
  report->add_option("--gate", ro.gate_json, "the JSON written by `loopgate gate --json` (readable)")->required();
  report->add_option("--out", ro.out, "the HTML file (default: report.html beside the gate JSON; checked writable first)");
  SyncsOptions sy;
  CLI::App* syncs = add_syncs_command(app, sy);
  PairOptions pr;
  CLI::App* pair = add_pair_command(app, pr);
  add_ab_flags(pair, pr.json_path, pr.alpha, pr.step);
  CLI::App* reference = app.add_subcommand("cli-reference", "print every subcommand's options as Markdown")->group("");

  SelftestOptions so;
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

  // CLI11 reads an unknown first word as a stray positional ("A subcommand is required"): name it instead.
  std::string known;
  bool first_known = false;
  const std::string first = argc < 2 ? "" : argv[1];
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    first_known = first_known || sub->get_name() == first;
    if (!sub->get_group().empty()) known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  if (argc < 2) return input_error("a subcommand is required: " + known + " (loopgate --help)");
  if (first.empty() || (first[0] != '-' && !first_known))
    return input_error(fmt::format("unknown subcommand '{}' (known: {})", first, known));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    return input_error(msg.empty() ? "bad arguments (see --help)" : msg);
  }
  try {
    check_no_empty_values(app);
    if (*reference) {
      print_cli_reference(app);
      return 0;
    }
    if (*run) return cmd_run(to_run_options(rf));
    std::string self = self_path(argv[0]);
    if (*selftest) {
      so.suites_exe = self.substr(0, self.rfind('/')) + "/../suites/loopgate_gates";
      so.gpu_loop_exe = self.substr(0, self.rfind('/')) + "/../suites/gpu/loopgate_gpu_loop";
      so.unit_exe = self.substr(0, self.rfind('/')) + "/../suites/loopgate_unit";
      so.self_exe = self;
      so.source_dir = std::filesystem::path(trainer_source_dir()).parent_path().string();
      return cmd_selftest(so);
    }
    if (*gate) {
      if (go.suites_exe.empty()) go.suites_exe = self.substr(0, self.rfind('/')) + "/../suites/loopgate_gates";
      if (go.gpu_loop_exe.empty())
        go.gpu_loop_exe = go.suites_exe.substr(0, go.suites_exe.rfind('/') + 1) + "gpu/loopgate_gpu_loop";
      return cmd_gate(go);
    }
    if (*ab_cmd) {
      if (ab_arms.empty()) {
        LG_INPUT_CHECK(!ab.a.empty() && !ab.b.empty(), "ab: give two run files (loopgate ab A B), or --arms A,B inside "
                                                       "mpirun to alternate two arms in one process");
        LG_INPUT_CHECK(!gpu_flags().profile, "--profile: ab profiles the device only in-process (--arms A,B "
                                             "--device cuda inside mpirun), not from run files");
        return cmd_ab(ab);
      }
      LG_INPUT_CHECK(ab_arms.size() == 2, "--arms {}: exactly two arms, A,B", fmt::join(ab_arms, ","));
      LG_INPUT_CHECK(ab.a.empty(), "ab --arms: no run files ({} given): the arms run here", ab.a);
      abp.run = to_run_options(abrf);
      abp.arm_a = ab_arms[0];
      abp.arm_b = ab_arms[1];
      abp.alpha = ab.alpha;
      abp.json_path = ab.json_path;
      return cmd_ab_phases(abp);
    }
    if (*compare) return cmd_compare(cmp);
    if (*syncs) {
      sy.self_exe = self;
      return cmd_syncs(sy);
    }
    if (*pair) {
      pr.self_exe = self;
      return cmd_pair(pr);
    }
    if (*report) return cmd_report(ro);
    if (*golden) {
      gd.self_exe = self;
      return cmd_golden(gd);
    }
  } catch (const InputError& e) {
    return input_error(e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loopgate: rank %d: %s\n", world_rank_for_errors(), e.what());
    return 1;
  }
  return 2;
}
