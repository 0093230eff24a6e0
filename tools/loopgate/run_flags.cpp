// `loopgate run`'s flags: CLI11 definitions (Megatron's names where Megatron has the flag), each flag's own
// range check, and the RunConfig they make. Every InputError here names the flag and the value as typed; a flag
// that would be silently ignored (a typo that looks like a pass) is refused rather than dropped.
// Not here: checks against the world size or across flags (validate.cpp).
#include "fixtures/faults/fault.h"
#include "tools/loopgate/run_flags.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <climits>
#include <cmath>

#include "fixtures/fixtures.h"
#include "fixtures/run_features.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "trainer/common/error.h"

namespace loopgate {

std::string quoted(const std::string& text) { return "'" + text + "'"; }

void add_run_flags(CLI::App* run, RunFlags& f) {
  // Instrumenting and replaying flags are in kRunFeatures: the run_features gate crosses each with every loop
  // decision (fixtures/run_features.h, held to this group by a unit test).
  run->add_option("--fixture", f.fixture, "single (default) | tp2sp | pp2 | dp64 | pp2tp2dp2; the job must have the fixture's rank count");
  run->add_option("--arm", f.arm, "baseline (default) | syncfree-1..5 | syncfree | onesync | zerosync | defect-*");
  run->add_option("--iters,--train-iters", f.iters, "iterations, >= 1 (default 10)");
  run->add_option("--log-interval", f.log_interval, "log every K iterations, >= 1 (default 1)");
  run->add_option("--exit-duration-in-mins", f.exit_mins, "exit when training time exceeds M minutes, > 0");
  run->add_option("--simulated-minutes-per-iteration", f.sim_minutes,
                  "deterministic clock for the exit vote, > 0 (needs --exit-duration-in-mins)");
  run->add_option("--save", f.save, "save checkpoints into DIR (Megatron's layout: DIR/iter_N/rank_R.pt and the tracker)")
      ->group("Checkpoints");
  run->add_option("--save-interval", f.save_interval,
                  "save after every N-th iteration, N >= 2, a log point or between two (needs --save)")
      ->group("Checkpoints");
  run->add_option("--load", f.load, "continue from the latest checkpoint in DIR (its tracker names the iteration)")
      ->group("Checkpoints");
  run->add_option("--exit-interval", f.exit_interval,
                  "end the run after every N-th iteration, N >= 1; with --save it saves first, so there N >= 2")
      ->group("Checkpoints");
  run->add_option("--inject", f.inject,
                  "faults: iter=I,site=loss|grad[,mb=M][,bucket=K][,rank=R][,kind=nan|inf];... (I counts from 0, "
                  "< --iters; M < microbatches; K < the targeted ranks' grad buckets; R < ranks)");
  run->add_option("--trace", f.trace, "write the Trace (all ranks) as JSON to FILE (checked writable first)");
  run->add_flag("--syncs", f.syncs, "print host reads per site per iteration");
  run->add_option("--syncs-json", f.syncs_json,
                  "write rank 0's host reads per site per iteration as a loopgate syncs table (the CUPTI counter's "
                  "JSON: loopgate syncs --diff and loopgate pair read it) to FILE (checked writable first)");
  run->add_flag("--quiet", f.quiet, "no Megatron log lines");
  run->add_flag("--check-collectives", f.check_collectives,
                "before every collective the group's ranks agree on a fingerprint: a rank that skips or reorders one "
                "is named at its next collective instead of hanging (one small all-gather and host read each)")
      ->group(kRunFeatures);
  run->add_flag("--record-collectives", f.record_collectives,
                "the Trace lists every collective and send/recv each rank issued, per iteration (host bookkeeping, "
                "no device read)")
      ->group(kRunFeatures);
  run->add_flag("--digests", f.digests,
                "the Trace holds a bit-exact digest of every module boundary, grad, optimizer state, loss and "
                "collective per iteration and microbatch, computed on the device and read once after the run "
                "(loopgate compare names the first that differs)")
      ->group(kRunFeatures);
  run->add_option("--tensor-model-parallel-size", f.tp, ">= 1, divides heads, vocab and the ranks / pp");
  run->add_option("--pipeline-model-parallel-size", f.pp, ">= 1, divides layers and the ranks / tp");
  run->add_flag("--sequence-parallel", f.sp, "sequence parallel (seq length divisible by tp)");
  run->add_flag("--no-sequence-parallel", f.no_sp, "no sequence parallel");
  run->add_option("--micro-batch-size", f.mbs, ">= 1");
  run->add_option("--global-batch-size", f.gbs, ">= 1, divisible by micro batch x dp");
  run->add_option("--seq-length", f.seq, ">= 1");
  run->add_option("--hidden-size", f.hidden, ">= 1, divisible by heads");
  run->add_option("--num-layers", f.layers, ">= 1, divisible by pp");
  run->add_option("--num-attention-heads", f.heads, ">= 1, divisible by tp");
  run->add_option("--lr", f.lr, "peak learning rate, >= 0 and >= --min-lr");
  run->add_option("--min-lr", f.min_lr, ">= 0");
  run->add_option("--lr-decay-style", f.decay, "constant | linear | cosine | inverse-square-root | WSD");
  run->add_option("--lr-warmup-iters", f.warmup, ">= 0, < the decay iterations");
  run->add_option("--lr-decay-iters", f.decay_iters, ">= 1 (default: --iters)");
  run->add_option("--lr-wsd-decay-iters", f.wsd_decay_iters, "WSD's anneal iterations, >= 1 (WSD only, required there)");
  run->add_option("--clip-grad", f.clip, "grad norm clip, >= 0 (0: off)");
  run->add_option("--weight-decay", f.wd, ">= 0");
  run->add_option("--loss-scale", f.loss_scale, "constant loss scale, > 0 (default: none, as bf16)");
  run->add_flag("--dynamic-loss-scale", f.dynamic_scale, "fp16-style dynamic loss scaler (not with --loss-scale); turns the NaN/Inf checks off, as Megatron does");
  run->add_option("--rerun-mode", f.rerun_mode, "disabled | validate_results (default) | report_stats");
  run->add_option("--on-fault", f.on_fault, "abort (default: Megatron's exit code) | skip");
  run->add_option("--grad-bucket-size", f.bucket, "grad buffer bucket size in elements, >= 1");
  run->add_option("--seed", f.seed, "init seed, >= 0");
  run->add_option("--data-seed", f.data_seed, "mock data seed, >= 0");
  run->add_option("--reduce-order", f.reduce_order, "native | fixed | permuted (float sum order; native: the backend's own, rank order on shm; default: the fixture's)");
  run->add_option("--cpu-comm", f.cpu_comm,
                  "mpi | shm (the CPU groups' backend, default: the fixture's; shm: one host, shared memory, sums in "
                  "rank order)");
  run->add_option("--permute-seed", f.permute_seed, ">= 0 (needs --reduce-order permuted)");
}

namespace {

// A count that becomes an int in the config: [lo, INT_MAX].
void check_count(const char* flag, const std::optional<int64_t>& v, int64_t lo, const char* what) {
  if (!v) return;
  LG_INPUT_CHECK(*v >= lo, "{} {}: must be >= {} ({})", flag, *v, lo, what);
  LG_INPUT_CHECK(*v <= INT_MAX, "{} {}: must be <= {} ({})", flag, *v, INT_MAX, what);
}

void check_real(const char* flag, const std::optional<double>& v, double lo, bool lo_inclusive, const char* what) {
  if (!v) return;
  LG_INPUT_CHECK(std::isfinite(*v), "{} {}: must be a finite number ({})", flag, *v, what);
  LG_INPUT_CHECK(lo_inclusive ? *v >= lo : *v > lo, "{} {}: must be {} {} ({})", flag, *v, lo_inclusive ? ">=" : ">",
                 lo, what);
}

void check_choice(const char* flag, const std::optional<std::string>& v, std::initializer_list<const char*> choices) {
  if (!v) return;
  std::string known;
  for (const char* c : choices) {
    if (*v == c) return;
    known += (known.empty() ? "" : ", ") + std::string(c);
  }
  throw InputError(fmt::format("{} {}: must be one of {}", flag, quoted(*v), known));
}

// Library parsers name the value but not the flag: prefix it.
template <class Fn>
auto with_flag(const char* flag, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", flag, e.what()));
  }
}

ReduceOrder reduce_order(const std::string& name) {
  if (name == "fixed") return ReduceOrder::kFixed;
  if (name == "permuted") return ReduceOrder::kPermuted;
  return ReduceOrder::kNative;
}

}  // namespace

void check_run_flags(const RunFlags& f) {
  with_flag("--fixture", [&] { return find_fixture(f.fixture); });
  with_flag("--arm", [&] { return find_arm(f.arm); });
  check_count("--iters", f.iters, 1, "training iterations");
  check_count("--log-interval", f.log_interval, 1, "iterations between log lines");
  check_count("--save-interval", f.save_interval, 1, "iterations between saves");
  check_count("--exit-interval", f.exit_interval, 1, "iterations before the run ends");
  LG_INPUT_CHECK(!f.save_interval || f.save, "--save-interval {}: applies only with --save", f.save_interval.value_or(0));
  LG_INPUT_CHECK(!f.save || !f.save->empty(), "--save '': needs a folder");
  LG_INPUT_CHECK(!f.load || !f.load->empty(), "--load '': needs a folder");
  check_count("--tensor-model-parallel-size", f.tp, 1, "tensor-parallel ranks");
  check_count("--pipeline-model-parallel-size", f.pp, 1, "pipeline stages");
  check_count("--micro-batch-size", f.mbs, 1, "samples per microbatch");
  check_count("--global-batch-size", f.gbs, 1, "samples per iteration");
  check_count("--seq-length", f.seq, 1, "tokens per sample");
  check_count("--hidden-size", f.hidden, 1, "model width");
  check_count("--num-layers", f.layers, 1, "transformer layers");
  check_count("--num-attention-heads", f.heads, 1, "attention heads");
  check_count("--grad-bucket-size", f.bucket, 1, "elements per grad bucket");
  check_count("--lr-warmup-iters", f.warmup, 0, "0 = no warmup");
  check_count("--lr-decay-iters", f.decay_iters, 1, "iterations the LR decays over");
  check_count("--lr-wsd-decay-iters", f.wsd_decay_iters, 1, "WSD's anneal iterations");
  LG_INPUT_CHECK(!f.seed || *f.seed >= 0, "--seed {}: must be >= 0", *f.seed);
  LG_INPUT_CHECK(!f.data_seed || *f.data_seed >= 0, "--data-seed {}: must be >= 0", *f.data_seed);
  LG_INPUT_CHECK(!f.permute_seed || *f.permute_seed >= 0, "--permute-seed {}: must be >= 0", *f.permute_seed);
  check_real("--lr", f.lr, 0.0, true, "learning rate");
  check_real("--min-lr", f.min_lr, 0.0, true, "Megatron asserts min_lr >= 0");
  check_real("--clip-grad", f.clip, 0.0, true, "0 turns clipping off");
  check_real("--weight-decay", f.wd, 0.0, true, "weight decay");
  check_real("--loss-scale", f.loss_scale, 0.0, false, "a constant loss scale; leave it out for none");
  check_real("--exit-duration-in-mins", f.exit_mins, 0.0, false, "leave it out for no time limit");
  check_real("--simulated-minutes-per-iteration", f.sim_minutes, 0.0, false, "the exit vote's clock");
  check_choice("--lr-decay-style", f.decay, {"constant", "linear", "cosine", "inverse-square-root", "WSD"});
  check_choice("--rerun-mode", f.rerun_mode, {"disabled", "validate_results", "report_stats"});
  check_choice("--on-fault", f.on_fault, {"abort", "skip"});
  check_choice("--reduce-order", f.reduce_order, {"native", "fixed", "permuted"});
  check_choice("--cpu-comm", f.cpu_comm, {"mpi", "shm"});
  LG_INPUT_CHECK(!f.cpu_comm || gpu_flags().device != "cuda", "--cpu-comm {}: applies only on CPU (--device cuda "
                 "runs NCCL)", f.cpu_comm.value_or(""));
  // Pairs that contradict each other, and flags that would be silently ignored.
  LG_INPUT_CHECK(!(f.sp && f.no_sp), "--sequence-parallel and --no-sequence-parallel: give one");
  LG_INPUT_CHECK(!(f.loss_scale && f.dynamic_scale), "--loss-scale {} and --dynamic-loss-scale: give one",
                 f.loss_scale.value_or(0));
  LG_INPUT_CHECK(!f.permute_seed || f.reduce_order == std::optional<std::string>("permuted"),
                 "--permute-seed {}: applies only with --reduce-order permuted", f.permute_seed.value_or(0));
  LG_INPUT_CHECK(!f.sim_minutes || f.exit_mins, "--simulated-minutes-per-iteration {}: applies only with "
                 "--exit-duration-in-mins (it is the exit vote's clock)", f.sim_minutes.value_or(0));
  LG_INPUT_CHECK(!f.wsd_decay_iters || f.decay == std::optional<std::string>("WSD"),
                 "--lr-wsd-decay-iters {}: applies only with --lr-decay-style WSD", f.wsd_decay_iters.value_or(0));
  LG_INPUT_CHECK(!f.trace || !f.trace->empty(), "--trace '': needs a file name");
}

RunOptions to_run_options(const RunFlags& f) {
  check_run_flags(f);
  RunOptions o;
  o.flags = f;
  o.config = fixture_config(f.fixture);
  RunConfig& c = o.config;
  o.arm = f.arm;
  o.trace_path = f.trace.value_or("");
  o.syncs = f.syncs;
  o.syncs_json = f.syncs_json.value_or("");
  c.check_collectives = f.check_collectives;
  c.record_collectives = f.record_collectives;
  c.digests = f.digests;
  o.quiet = f.quiet;
  auto as_int = [](int64_t v) { return static_cast<int>(v); };  // range-checked above
  if (f.iters) c.train_iters = *f.iters;
  if (f.log_interval) c.log_interval = as_int(*f.log_interval);
  if (f.exit_mins) c.exit_duration_in_mins = *f.exit_mins;
  if (f.sim_minutes) c.simulated_minutes_per_iteration = *f.sim_minutes;
  c.save_dir = f.save.value_or("");
  c.save_interval = f.save_interval.value_or(0);
  c.load_dir = f.load.value_or("");
  c.exit_interval = f.exit_interval.value_or(0);
  if (f.inject) {
    o.faults = with_flag("--inject", [&] { return parse_fault_specs(*f.inject); });
    c.faults = inject(o.faults);
  }
  if (f.tp) c.layout.tp = as_int(*f.tp);
  if (f.pp) c.layout.pp = as_int(*f.pp);
  if (f.sp) c.layout.sequence_parallel = true;
  if (f.no_sp) c.layout.sequence_parallel = false;
  if (f.mbs) c.data.micro_batch = as_int(*f.mbs);
  if (f.gbs) c.data.global_batch = as_int(*f.gbs);
  if (f.seq) c.model.seq = as_int(*f.seq);
  if (f.hidden) c.model.hidden = as_int(*f.hidden);
  if (f.layers) c.model.layers = as_int(*f.layers);
  if (f.heads) c.model.heads = as_int(*f.heads);
  if (f.lr) c.schedule.lr = *f.lr;
  if (f.min_lr) c.schedule.min_lr = *f.min_lr;
  if (f.decay) c.schedule.lr_decay_style = parse_decay_style(*f.decay);
  if (f.warmup) c.schedule.lr_warmup_iters = *f.warmup;
  if (f.decay_iters) c.schedule.lr_decay_iters = *f.decay_iters;
  if (f.wsd_decay_iters) c.schedule.lr_wsd_decay_iters = *f.wsd_decay_iters;
  if (f.clip) c.optim.clip_grad = *f.clip;
  if (f.wd) c.weight_decay = *f.wd;
  if (f.loss_scale) c.loss_scale = *f.loss_scale;
  c.dynamic_loss_scale = f.dynamic_scale;
  // Megatron arguments.py (fp16 without --loss-scale): check_for_nan_in_loss_and_grad = False, "NaNs in grads / loss
  // are signal to the loss scaler" — an overflow skips the step through found_inf, not the rerun machine.
  if (f.dynamic_scale) c.rerun.check_for_nan_in_loss_and_grad = false;
  if (f.rerun_mode) c.rerun.mode = parse_rerun_mode(*f.rerun_mode);
  if (f.on_fault) c.rerun.on_fault = parse_fault_outcome(*f.on_fault);
  if (f.bucket) c.bucket_size = *f.bucket;
  if (f.seed) c.model.init_seed = static_cast<uint64_t>(*f.seed);
  if (f.data_seed) c.data.data_seed = static_cast<uint64_t>(*f.data_seed);
  if (f.reduce_order) c.comm.order = reduce_order(*f.reduce_order);
  if (f.cpu_comm) c.cpu_comm = *f.cpu_comm == "shm" ? CpuComm::kShm : CpuComm::kMpi;
  if (f.permute_seed) c.comm.permute_seed = static_cast<uint64_t>(*f.permute_seed);
  apply_gpu_flags(gpu_flags(), c);
  return o;
}

CLI::App* add_run_command(CLI::App& app, RunFlags& rf) {
  CLI::App* run = app.add_subcommand("run", "run one arm on one fixture (inside mpirun)");
  add_run_flags(run, rf);
  add_gpu_flags(run, gpu_flags());
  return run;
}

}  // namespace loopgate
