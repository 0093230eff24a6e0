// loopgate: the command line of the loop-change gate.
//   mpirun -np N loopgate run --fixture F --arm A [...]   one arm on one fixture: Megatron log lines, sync table, Trace
//   loopgate gate [--fixture F ...] [--arm A ...]          every gate on every CPU fixture: verdict table, exit 0/1/2
//   loopgate golden --check | --update                    compare with / rewrite golden/ (the only writer)
//   loopgate ab A B                                        step time of two runs' files: medians, shift, Mann-Whitney
//   loopgate compare --a A1 [A2..] --b B1 [B2..]           did the change keep the numbers (Megatron logs, Traces)
//   loopgate report --gate gate.json [--out report.html]  one self-contained HTML page from a gate run
// Flags keep Megatron's names where Megatron has the flag. Bad input: one line on stderr, exit 2.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "fixtures/fixtures.h"
#include "fixtures/golden.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/report.h"
#include "trainer/common/error.h"

namespace loopgate {

bool is_rank_zero_env() {
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  return r == nullptr || std::string(r) == "0";
}

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

struct RunFlags {
  std::string fixture = "single", arm = "baseline", inject, trace, rerun_mode = "validate_results",
              on_fault = "abort", decay = "", reduce_order = "native";
  int64_t iters = -1, log_interval = -1, warmup = -1, decay_iters = -1, tp = -1, pp = -1, mbs = -1, gbs = -1;
  int64_t seq = -1, hidden = -1, layers = -1, heads = -1, bucket = -1, seed = -1, data_seed = -1, permute_seed = 0;
  double exit_mins = -1, lr = -1, min_lr = -1, clip = -1, wd = -1, loss_scale = -1, sim_minutes = -1;
  bool sp = false, no_sp = false, syncs = false, quiet = false, dynamic_scale = false;
};

void add_run_flags(CLI::App* run, RunFlags& f) {
  run->add_option("--fixture", f.fixture, "single | tp2sp | pp2 | dp64 | pp2tp2dp2");
  run->add_option("--arm", f.arm, "baseline | syncfree-1..5 | syncfree | onesync | defect-*");
  run->add_option("--iters,--train-iters", f.iters, "iterations (default 10)");
  run->add_option("--log-interval", f.log_interval, "log every K iterations (default 1)");
  run->add_option("--exit-duration-in-mins", f.exit_mins, "exit when training time exceeds M minutes");
  run->add_option("--simulated-minutes-per-iteration", f.sim_minutes, "deterministic clock for the exit vote");
  run->add_option("--inject", f.inject, "faults: iter=I,site=loss|grad[,mb=M][,bucket=K][,rank=R][,kind=nan|inf];...");
  run->add_option("--trace", f.trace, "write the Trace (all ranks) as JSON to FILE");
  run->add_flag("--syncs", f.syncs, "print host reads per site per iteration");
  run->add_flag("--quiet", f.quiet, "no Megatron log lines");
  run->add_option("--tensor-model-parallel-size", f.tp);
  run->add_option("--pipeline-model-parallel-size", f.pp);
  run->add_flag("--sequence-parallel", f.sp);
  run->add_flag("--no-sequence-parallel", f.no_sp);
  run->add_option("--micro-batch-size", f.mbs);
  run->add_option("--global-batch-size", f.gbs);
  run->add_option("--seq-length", f.seq);
  run->add_option("--hidden-size", f.hidden);
  run->add_option("--num-layers", f.layers);
  run->add_option("--num-attention-heads", f.heads);
  run->add_option("--lr", f.lr);
  run->add_option("--min-lr", f.min_lr);
  run->add_option("--lr-decay-style", f.decay, "constant | linear | cosine | inverse-square-root | WSD");
  run->add_option("--lr-warmup-iters", f.warmup);
  run->add_option("--lr-decay-iters", f.decay_iters);
  run->add_option("--clip-grad", f.clip);
  run->add_option("--weight-decay", f.wd);
  run->add_option("--loss-scale", f.loss_scale, "constant loss scale (default: none, as bf16)");
  run->add_flag("--dynamic-loss-scale", f.dynamic_scale, "fp16-style dynamic loss scaler");
  run->add_option("--rerun-mode", f.rerun_mode, "disabled | validate_results | report_stats");
  run->add_option("--on-fault", f.on_fault, "abort (Megatron's exit code) | skip");
  run->add_option("--grad-bucket-size", f.bucket, "grad buffer bucket size in elements");
  run->add_option("--seed", f.seed, "init seed");
  run->add_option("--data-seed", f.data_seed, "mock data seed");
  run->add_option("--reduce-order", f.reduce_order, "native | fixed | permuted (float sum order)");
  run->add_option("--permute-seed", f.permute_seed);
}

void add_ab_flags(CLI::App* cmd, std::string& json_path, double& alpha, StepTimeOptions& step) {
  cmd->add_option("--json", json_path, "write the report as JSON to FILE");
  cmd->add_option("--alpha", alpha, "significance level of the Mann-Whitney test (default 0.05)");
  cmd->add_option("--window", step.window, "iterations per step-time window (default 0: one window per log line)");
  cmd->add_option("--warmup-windows", step.warmup_windows, "windows dropped at the start of each run (default 1)");
  cmd->add_option("--time-source", step.source,
                  "auto (timestamps when every line has one, else the elapsed field) | timestamps | elapsed");
}

RunOptions to_run_options(const RunFlags& f) {
  RunOptions o;
  o.config = fixture_config(f.fixture);
  RunConfig& c = o.config;
  find_arm(f.arm);
  o.arm = f.arm;
  o.trace_path = f.trace;
  o.syncs = f.syncs;
  o.quiet = f.quiet;
  if (f.iters >= 0) c.train_iters = f.iters;
  LG_INPUT_CHECK(c.train_iters >= 1, "--iters must be >= 1 (got {})", c.train_iters);
  if (f.log_interval >= 0) c.log_interval = static_cast<int>(f.log_interval);
  LG_INPUT_CHECK(c.log_interval >= 1, "--log-interval must be >= 1 (got {})", c.log_interval);
  if (f.exit_mins >= 0) c.exit_duration_in_mins = f.exit_mins;
  if (f.sim_minutes >= 0) c.simulated_minutes_per_iteration = f.sim_minutes;
  c.faults = parse_fault_specs(f.inject);
  if (f.tp > 0) c.layout.tp = static_cast<int>(f.tp);
  if (f.pp > 0) c.layout.pp = static_cast<int>(f.pp);
  if (f.sp) c.layout.sequence_parallel = true;
  if (f.no_sp) c.layout.sequence_parallel = false;
  if (f.mbs > 0) c.data.micro_batch = static_cast<int>(f.mbs);
  if (f.gbs > 0) c.data.global_batch = static_cast<int>(f.gbs);
  if (f.seq > 0) c.model.seq = static_cast<int>(f.seq);
  if (f.hidden > 0) c.model.hidden = static_cast<int>(f.hidden);
  if (f.layers > 0) c.model.layers = static_cast<int>(f.layers);
  if (f.heads > 0) c.model.heads = static_cast<int>(f.heads);
  if (f.lr >= 0) c.schedule.lr = f.lr;
  if (f.min_lr >= 0) c.schedule.min_lr = f.min_lr;
  if (!f.decay.empty()) c.schedule.lr_decay_style = parse_decay_style(f.decay);
  if (f.warmup >= 0) c.schedule.lr_warmup_iters = f.warmup;
  if (f.decay_iters >= 0) c.schedule.lr_decay_iters = f.decay_iters;
  if (f.clip >= 0) c.optim.clip_grad = f.clip;
  if (f.wd >= 0) c.weight_decay = f.wd;
  if (f.loss_scale > 0) c.loss_scale = f.loss_scale;
  c.dynamic_loss_scale = f.dynamic_scale;
  c.rerun.mode = parse_rerun_mode(f.rerun_mode);
  c.rerun.on_fault = parse_fault_outcome(f.on_fault);
  if (f.bucket > 0) c.bucket_size = f.bucket;
  if (f.seed >= 0) c.model.init_seed = static_cast<uint64_t>(f.seed);
  if (f.data_seed >= 0) c.data.data_seed = static_cast<uint64_t>(f.data_seed);
  if (f.reduce_order == "native") {
    c.comm.order = ReduceOrder::kNative;
  } else if (f.reduce_order == "fixed") {
    c.comm.order = ReduceOrder::kFixed;
  } else if (f.reduce_order == "permuted") {
    c.comm.order = ReduceOrder::kPermuted;
  } else {
    throw InputError("--reduce-order must be native, fixed or permuted (got '" + f.reduce_order + "')");
  }
  c.comm.permute_seed = static_cast<uint64_t>(f.permute_seed);
  apply_gpu_flags(gpu_flags(), c);
  return o;
}

}  // namespace
}  // namespace loopgate

int main(int argc, char** argv) {
  using namespace loopgate;
  CLI::App app{"loopgate: the acceptance gate for distributed training-loop changes"};
  app.require_subcommand(1);
  RunFlags rf;
  CLI::App* run = app.add_subcommand("run", "run one arm on one fixture (inside mpirun)");
  add_run_flags(run, rf);
  add_gpu_flags(run, gpu_flags());

  GateOptions go;
  CLI::App* gate = app.add_subcommand("gate", "run every gate on every CPU fixture and print the verdict table");
  gate->add_option("--fixture", go.fixtures, "fixtures (repeatable or a,b list; default: every CPU fixture)")
      ->delimiter(',');
  gate->add_option("--arm", go.arms, "candidate arms (repeatable or a,b list; default: syncfree-1..5, syncfree, onesync)")
      ->delimiter(',');
  gate->add_option("--check", go.checks, "gates (repeatable or a,b list; default: all)")->delimiter(',');
  gate->add_option("--iters", go.iters, "iterations per scenario (default: each gate's own)");
  gate->add_option("--json", go.json_path, "write the verdicts as JSON");
  gate->add_option("--junit", go.junit_path, "write the verdicts as JUnit XML");
  gate->add_option("--suites-exe", go.suites_exe, "the gate suites executable (yours, with registered arms and fixtures: docs/custom-arms.md)");
  gate->add_option("--mpiexec", go.mpiexec, "the MPI launcher");
  gate->add_option("--progress-timeout", go.progress_timeout,
                   "seconds a test may go without progress on a rank before it fails and the fixture relaunches "
                   "for the tests not yet run (default 60)");
  gate->add_option("--jobs", go.jobs, "fixtures of at most 2 ranks run this many at a time (default 1: on 2 cores, two jobs' waiting ranks spin against each other)");

  GoldenOptions gd;
  CLI::App* golden = app.add_subcommand("golden", "compare with golden values (--check) or rewrite them (--update)");
  golden->add_flag("--check", gd.check);
  golden->add_flag("--update", gd.update);
  golden->add_option("--fixture", gd.fixtures, "fixtures (repeatable or a,b list; default: every CPU fixture)")
      ->delimiter(',');
  gd.golden_dir = default_golden_dir();  // the installed or the source tree's golden/, wherever loopgate is run from
  golden->add_option("--golden-dir", gd.golden_dir,
                     "golden values folder (default: $LOOPGATE_GOLDEN_DIR, the installed share/loopgate/golden, or the source tree's golden/)");
  golden->add_option("--mpiexec", gd.mpiexec);
  golden->add_option("--capture", gd.capture_dir)->group("");  // internal: the per-fixture MPI worker of --update

  AbOptions ab;
  CLI::App* ab_cmd = app.add_subcommand("ab", "step time A vs B from two runs' files (Megatron logs, Traces, golden values)");
  ab_cmd->add_option("a", ab.a, "run A: Megatron log, loopgate Trace or golden-values JSON")->required();
  ab_cmd->add_option("b", ab.b, "run B")->required();
  add_ab_flags(ab_cmd, ab.json_path, ab.alpha, ab.step);

  CompareOptions cmp;
  CLI::App* compare = app.add_subcommand("compare", "did the change keep the numbers: verdict rows over runs of A and B");
  compare->add_option("--a", cmp.a, "runs of A (baseline): Megatron logs, Traces or golden values")->required()->expected(1, -1);
  compare->add_option("--b", cmp.b, "runs of B (candidate)")->required()->expected(1, -1);
  compare->add_option("--early", cmp.early, "lm loss and params norm identical at iterations 1..K (default 2)");
  add_ab_flags(compare, cmp.json_path, cmp.alpha, cmp.step);
  ReportOptions ro;
  CLI::App* report = app.add_subcommand("report", "write one self-contained HTML page from `loopgate gate --json` output");
  report->add_option("--gate", ro.gate_json, "the JSON written by `loopgate gate --json`")->required();
  report->add_option("--out", ro.out, "the HTML file (default: report.html beside the gate JSON)");

  SelftestOptions so;
  CLI::App* selftest = app.add_subcommand("selftest", "run every planted defect through the gate that must reject it");
  selftest->add_option("--defect", so.defects, "defects (repeatable or a,b list; default: the whole catalogue)")
      ->delimiter(',');
  selftest->add_option("--progress-timeout", so.progress_timeout,
                       "seconds a stuck rank waits before the watchdog fails a hanging defect's test (default 10)");
  selftest->add_option("--json", so.json_path, "write the results as JSON");
  selftest->add_option("--mpiexec", so.mpiexec, "the MPI launcher");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    return input_error(msg.empty() ? "bad arguments (see --help)" : msg);
  }
  try {
    if (*run) return cmd_run(to_run_options(rf));
    std::string self = self_path(argv[0]);
    if (*selftest) {
      so.suites_exe = self.substr(0, self.rfind('/')) + "/../suites/loopgate_gates";
      return cmd_selftest(so);
    }
    if (*gate) {
      if (go.suites_exe.empty()) go.suites_exe = self.substr(0, self.rfind('/')) + "/../suites/loopgate_gates";
      return cmd_gate(go);
    }
    if (*ab_cmd) return cmd_ab(ab);
    if (*compare) return cmd_compare(cmp);
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
