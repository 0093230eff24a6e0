// Every subcommand's input checked before any work (validate.h). `loopgate run`'s checks mirror what the trainer
// would assert later (Layout::build, init_stage_params, num_microbatches, OptimizerParamScheduler, the fault
// injector's silent no-match) but speak in the user's flags: "--lr-warmup-iters (fixture default 2)", not
// "lr_warmup_steps 16". A flag left out is shown with the fixture's value, so the line says what to change.
// Not here: single flags' ranges (run_flags.cpp), parsing (CLI11, fault.h), the runs themselves.
#include "tools/loopgate/validate.h"
#include "tools/loopgate/gpu.h"

#include <fmt/format.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "fixtures/fixtures.h"
#include "fixtures/golden.h"
#include "fixtures/harness/seconds.h"
#include "tools/loopgate/verdicts.h"
#include "trainer/common/error.h"
#include "trainer/loop/checkpoint.h"
#include "trainer/model/init.h"
#include "trainer/optim/grad_buffer.h"

namespace loopgate {
namespace {

namespace fs = std::filesystem;

// "--flag V" when the user gave it, "--flag (fixture default V)" when the fixture chose it.
template <class T>
std::string shown(const char* flag, bool given, const T& value, const char* default_of = "fixture default") {
  return given ? fmt::format("{} {}", flag, value) : fmt::format("{} ({} {})", flag, default_of, value);
}

template <class Fn>
auto with_flag(const std::string& flag, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", flag, e.what()));
  }
}

std::string ranks_text(int first, int last) {  // "rank 3" or "ranks 4-7"
  return first == last ? fmt::format("rank {}", first) : fmt::format("ranks {}-{}", first, last);
}

// ---- loopgate run: the job, the layout, the model shape ----

void check_world_and_layout(const RunOptions& o, int world) {
  const RunFlags& f = o.flags;
  const RunConfig& c = o.config;
  const Fixture& fx = find_fixture(c.fixture);
  LG_INPUT_CHECK(world == fx.world, "--fixture {} needs {} rank{} (mpirun -np {}); this job has {}", fx.name, fx.world,
                 fx.world == 1 ? "" : "s", fx.world, world);
  const int tp = c.layout.tp, pp = c.layout.pp;
  LG_INPUT_CHECK(world % (tp * pp) == 0, "{} x {} = {} does not divide the job's {} rank{} (--fixture {})",
                 shown("--tensor-model-parallel-size", f.tp.has_value(), tp),
                 shown("--pipeline-model-parallel-size", f.pp.has_value(), pp), tp * pp, world, world == 1 ? "" : "s",
                 fx.name);
}

void check_model_shape(const RunOptions& o) {
  const RunFlags& f = o.flags;
  const RunConfig& c = o.config;
  const ModelConfig& m = c.model;
  const int tp = c.layout.tp, pp = c.layout.pp;
  const std::string hidden = shown("--hidden-size", f.hidden.has_value(), m.hidden);
  const std::string heads = shown("--num-attention-heads", f.heads.has_value(), m.heads);
  const std::string tps = shown("--tensor-model-parallel-size", f.tp.has_value(), tp);
  LG_INPUT_CHECK(m.hidden % m.heads == 0, "{} is not divisible by {} (each head gets hidden / heads channels)", hidden,
                 heads);
  LG_INPUT_CHECK(m.heads % tp == 0, "{} is not divisible by {} (each tensor-parallel rank holds whole heads)", heads,
                 tps);
  LG_INPUT_CHECK(m.vocab % tp == 0, "{}: the vocabulary ({} tokens, fixed) is not divisible by it (no vocab padding)",
                 tps, m.vocab);
  const std::string sp = f.sp ? "--sequence-parallel" : "sequence parallel (fixture default)";
  LG_INPUT_CHECK(!c.layout.sequence_parallel || m.seq % tp == 0, "{} needs {} divisible by {}{}", sp,
                 shown("--seq-length", f.seq.has_value(), m.seq), tps,
                 f.sp ? "" : " (--no-sequence-parallel turns it off)");
  LG_INPUT_CHECK(m.layers % pp == 0, "{} is not divisible by {} (layers are split evenly over the stages)",
                 shown("--num-layers", f.layers.has_value(), m.layers),
                 shown("--pipeline-model-parallel-size", f.pp.has_value(), pp));
}

void check_batch(const RunOptions& o, const Layout& layout) {
  const RunFlags& f = o.flags;
  const DataConfig& d = o.config.data;
  const int per_step = d.micro_batch * layout.dp();
  LG_INPUT_CHECK(d.global_batch % per_step == 0, "{} is not divisible by {} x data-parallel size {} = {}",
                 shown("--global-batch-size", f.gbs.has_value(), d.global_batch),
                 shown("--micro-batch-size", f.mbs.has_value(), d.micro_batch), layout.dp(), per_step);
}

// Megatron's OptimizerParamScheduler asserts, in iterations and flags rather than samples.
void check_schedule(const RunOptions& o) {
  const RunFlags& f = o.flags;
  const RunConfig& c = o.config;
  const SchedulerIters& s = c.schedule;
  LG_INPUT_CHECK(s.min_lr <= s.lr, "{} must be >= {} (Megatron asserts max_lr >= min_lr)",
                 shown("--lr", f.lr.has_value(), s.lr), shown("--min-lr", f.min_lr.has_value(), s.min_lr));
  const std::string iters = shown("--iters", f.iters.has_value(), c.train_iters);
  const int64_t decay = s.lr_decay_iters.value_or(c.train_iters);
  const std::string decay_text = f.decay_iters ? fmt::format("--lr-decay-iters {}", decay)
                                               : fmt::format("--lr-decay-iters, default {}", iters);
  std::vector<std::string> given;
  if (f.iters && !f.decay_iters) given.push_back(fmt::format("--iters {}", c.train_iters));
  if (f.decay_iters) given.push_back(fmt::format("--lr-decay-iters {}", decay));
  if (f.warmup) given.push_back(fmt::format("--lr-warmup-iters {}", s.lr_warmup_iters));
  std::string lead;
  for (const std::string& g : given) lead += (lead.empty() ? "" : ", ") + g;
  LG_INPUT_CHECK(s.lr_warmup_fraction || s.lr_warmup_iters < decay,
                 "{}{}the LR warmup ({}) must be shorter than the decay ({})", lead, lead.empty() ? "" : ": ",
                 f.warmup ? fmt::format("--lr-warmup-iters {}", s.lr_warmup_iters)
                          : fmt::format("--lr-warmup-iters, fixture default {}", s.lr_warmup_iters),
                 decay_text);
  LG_INPUT_CHECK(s.lr_decay_style != LrDecayStyle::kWSD || s.lr_wsd_decay_iters,
                 "--lr-decay-style WSD needs --lr-wsd-decay-iters (the anneal's length in iterations)");
}

void check_gpu_and_probe(const RunOptions& o) {
  const RunConfig& c = o.config;
#if !LOOPGATE_HAS_CUDA
  LG_INPUT_CHECK(!c.model.device.is_cuda(),
                 "--device cuda: this loopgate was built without the GPU tier (configure with LOOPGATE_CUDA=ON)");
#endif
  LG_INPUT_CHECK(!c.cuda_graph_iteration || c.log_interval > 1,
                 "--cuda-graph iteration with {}: every iteration is a log point, so none replays",
                 shown("--log-interval", o.flags.log_interval.has_value(), c.log_interval));
  LG_INPUT_CHECK(!(c.digests && c.cuda_graph_iteration),
                 "--digests with --cuda-graph iteration: a replayed iteration runs no host code to digest it");
  LG_INPUT_CHECK(!c.capture.enabled() || c.capture.iteration <= c.train_iters,
                 "--capture-probe {}@{}: iteration {} is past the run ({})", c.capture.region, c.capture.iteration,
                 c.capture.iteration, shown("--iters", o.flags.iters.has_value(), c.train_iters));
}

// ---- loopgate run: --inject against the run (a spec that matches nothing would report a clean run) ----

void check_fault(const RunOptions& o, const Layout& layout, const FaultSpec& s, const std::string& where) {
  const RunFlags& f = o.flags;
  const RunConfig& c = o.config;
  const int world = layout.world();
  LG_INPUT_CHECK(s.iteration < c.train_iters,
                 "{}: iter={} is past the run: {} runs iterations 0-{} (inject's iter counts from 0)", where,
                 s.iteration, shown("--iters", f.iters.has_value(), c.train_iters), c.train_iters - 1);
  LG_INPUT_CHECK(s.rank < world, "{}: rank={} is outside the job: --fixture {} runs {} rank{} ({})", where, s.rank,
                 c.fixture, world, world == 1 ? "" : "s", world == 1 ? "0" : fmt::format("0-{}", world - 1));
  if (s.site == FaultSpec::Site::kLoss) {
    const int micro = num_microbatches(c.data, layout);
    LG_INPUT_CHECK(s.microbatch < micro,
                   "{}: mb={} is beyond the {} microbatch{} of an iteration (0-{}: {} / ({} x data-parallel size {}))",
                   where, s.microbatch, micro, micro == 1 ? "" : "es", micro - 1,
                   shown("--global-batch-size", f.gbs.has_value(), c.data.global_batch),
                   shown("--micro-batch-size", f.mbs.has_value(), c.data.micro_batch), layout.dp());
    const int last_first = (layout.pp() - 1) * layout.tp() * layout.dp();
    LG_INPUT_CHECK(s.rank < 0 || layout.is_last_stage(s.rank),
                   "{}: rank={} holds pipeline stage {} of {}, which computes no loss (site=loss fires on the last "
                   "stage: {})",
                   where, s.rank, s.rank >= 0 ? layout.coord(s.rank).pp : 0, layout.pp(),
                   ranks_text(last_first, world - 1));
    return;
  }
  if (s.bucket < 0) return;
  const int64_t size = c.bucket_size > 0 ? c.bucket_size : kDefaultBucketSize;
  const std::string size_text = shown("--grad-bucket-size", f.bucket.has_value(), size, "default");
  for (int r = s.rank < 0 ? 0 : s.rank; r < (s.rank < 0 ? world : s.rank + 1); ++r) {
    const int n = grad_buckets_of_rank(c, layout, r);
    LG_INPUT_CHECK(s.bucket < n, "{}: bucket={} is beyond rank {}'s {} grad bucket{} (0-{}) with {}{}", where, s.bucket,
                   r, n, n == 1 ? "" : "s", n - 1, size_text,
                   s.rank < 0 ? fmt::format("; the spec targets every rank: name one with rank=R or pick a bucket "
                                            "below {}", n)
                              : "");
  }
}

void check_faults(const RunOptions& o, const Layout& layout) {
  const std::vector<FaultSpec>& specs = o.faults;
  for (size_t k = 0; k < specs.size(); ++k) {
    const std::string where =
        specs.size() == 1 ? fmt::format("--inject {}", quoted(o.flags.inject.value_or(to_string(specs[k]))))
                          : fmt::format("--inject spec {} of {} ({})", k + 1, specs.size(), quoted(to_string(specs[k])));
    check_fault(o, layout, specs[k], where);
  }
}

}  // namespace

int grad_buckets_of_rank(const RunConfig& c, const Layout& layout, int rank) {
  const int64_t size = c.bucket_size > 0 ? c.bucket_size : kDefaultBucketSize;  // as train.cpp setup() does
  return layout_grad_buckets(stage_param_numels(c.model, layout, rank), size).num_buckets();
}

// Saves fall after iteration 1 (the trainer's rule, checkpoint.h): asked before any work here.
void check_checkpoints(const RunOptions& o) {
  const RunConfig& c = o.config;
  if (!c.save_dir.empty()) {
    check_output_dir("--save", c.save_dir);
    check_save_intervals(c);
  }
  if (!c.load_dir.empty()) check_input_file("--load", c.load_dir + "/latest_checkpointed_iteration.txt");
}

void validate_run_options(const RunOptions& o, int world) {
  check_world_and_layout(o, world);
  const Layout layout = Layout::build(world, o.config.layout);
  check_model_shape(o);
  check_batch(o, layout);
  check_schedule(o);
  check_gpu_and_probe(o);
  check_faults(o, layout);
  check_checkpoints(o);
  if (!o.trace_path.empty()) check_output_file("--trace", o.trace_path);
  if (!o.syncs_json.empty()) check_output_file("--syncs-json", o.syncs_json);
}

// ---- loopgate gate ----

namespace {

// The gate's runs share the fixtures' LR schedule, and lr_schedule's skipped-steps case compares with golden/:
// an --iters outside these bounds fails every scenario or makes the LR gate's planted defect undetectable.
void check_gate_iters(const GateOptions& o, const std::vector<std::string>& fixtures) {
  const int64_t n = *o.iters;
  LG_INPUT_CHECK(n >= 1, "--iters {}: must be >= 1 (leave it out for each gate's own count)", n);
  for (const std::string& fx : fixtures) {
    const int64_t warmup = fixture_config(fx).schedule.lr_warmup_iters;
    LG_INPUT_CHECK(n > warmup, "--iters {}: the {} fixture's LR warmup is {} iterations, and the warmup must be "
                   "shorter than the run (need --iters >= {})", n, fx, warmup, warmup + 1);
  }
  const bool lr_gate = o.checks.empty() || std::count(o.checks.begin(), o.checks.end(), "lr_schedule") > 0;
  const bool lr_iters_from_flag = std::any_of(fixtures.begin(), fixtures.end(), [](const std::string& fx) {
    return fx != "dp64";  // dp64's LR scenario has its own 8 iterations (suites/lr_schedule.cpp lr_iters)
  });
  if (!lr_gate || !lr_iters_from_flag) return;
  const LrCase& skip = find_lr_case("cosine-skipped-steps");  // suites/lr_schedule.cpp skip_case()
  const int64_t first_skip = *std::min_element(skip.skipped_iterations.begin(), skip.skipped_iterations.end());
  LG_INPUT_CHECK(n >= first_skip, "--iters {}: the lr_schedule gate skips a step at iteration {}; a shorter run skips "
                 "none, so its planted defect could not be rejected (need --iters >= {}, or --check without "
                 "lr_schedule)", n, first_skip, first_skip);
  LG_INPUT_CHECK(n <= kLrIterations, "--iters {}: the lr_schedule gate compares with the {} iterations of "
                 "golden/lr_sequences.json (need --iters <= {}, or --check without lr_schedule)", n, kLrIterations,
                 kLrIterations);
}

}  // namespace

void validate_gate_options(const GateOptions& o) {
  // Arm and fixture names are checked by cmd_gate against the suites executable, which may register its own;
  // the iteration rules below apply to the fixtures this process knows.
  std::vector<std::string> fixtures;
  for (const std::string& f : o.fixtures)
    for (const Fixture& known : all_fixtures())
      if (known.name == f) fixtures.push_back(f);
  if (o.fixtures.empty())
    for (const Fixture& f : all_fixtures()) fixtures.push_back(f.name);
  std::string known;
  for (const auto& [check, suite] : gate_checks()) known += (known.empty() ? "" : ", ") + check;
  for (const std::string& c : o.checks) {
    bool found = false;
    for (const auto& [check, suite] : gate_checks()) found = found || check == c;
    LG_INPUT_CHECK(found, "--check {}: unknown gate (known: {})", quoted(c), known);
  }
  if (o.iters) check_gate_iters(o, fixtures);
  LG_INPUT_CHECK(o.device == "cpu" || o.device == "cuda", "--device {}: must be cpu or cuda", quoted(o.device));
  for (const std::string& c : o.checks)
    LG_INPUT_CHECK(o.device == "cuda" || !gpu_only_check(c),
                   "--check {}: a GPU-only check (needs --device cuda)", c);
  if (o.device == "cuda") {
    visible_gpu_count();  // InputError first where this loopgate has no GPU tier
    struct stat gst;
    LG_INPUT_CHECK(stat(o.gpu_loop_exe.c_str(), &gst) == 0 && access(o.gpu_loop_exe.c_str(), X_OK) == 0,
                   "--gpu-loop-exe {}: the GPU-only suites executable is missing (build with the gpu preset)",
                   o.gpu_loop_exe);
  }
  LG_INPUT_CHECK(o.cpus >= 0 && o.cpus <= 1024, "--cpus {}: must be in 0..1024 (0: this machine's cores)", o.cpus);
  LG_INPUT_CHECK(o.shards >= 0 && o.shards <= 64, "--shards {}: must be in 0..64 (0: auto)", o.shards);
  LG_INPUT_CHECK(o.progress_timeout > 0, "--progress-timeout {}: must be > 0 seconds", o.progress_timeout);
  // The suites' own timeouts, which the launch passes on in the environment: a typo must not turn one off.
  for (const char* var : {"LOOPGATE_TEST_TIMEOUT", "LOOPGATE_PROGRESS_TIMEOUT", "LOOPGATE_STALL_TIMEOUT"}) {
    const char* v = std::getenv(var);
    LG_INPUT_CHECK(v == nullptr || timeout_seconds(v), "{}={}: must be a number of seconds >= 0", var,
                   quoted(v ? v : ""));
  }
  struct stat st;
  LG_INPUT_CHECK(stat(o.suites_exe.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(o.suites_exe.c_str(), X_OK) == 0,
                 "--suites-exe {}: the gate suites executable is missing (build it: cmake --build --preset cpu)",
                 o.suites_exe);
  check_launcher("--mpiexec", o.mpiexec);
  if (!o.json_path.empty()) check_output_file("--json", o.json_path);
  if (!o.junit_path.empty()) check_output_file("--junit", o.junit_path);
}

// Before MPI_Init the launcher's environment names the rank (Open MPI, PMIx, MPICH/Hydra, Slurm): only rank 0
// prints an error found there, so a bad flag is one line however many ranks the job has.
bool is_rank_zero_env() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* r = std::getenv(var)) return std::string(r) == "0";
  return true;
}

bool stop_after_validation() {
  const char* v = std::getenv("LOOPGATE_VALIDATE_ONLY");
  if (v == nullptr || std::string(v) != "1") return false;
  if (is_rank_zero_env()) std::printf("loopgate: arguments valid\n");
  std::fflush(stdout);
  return true;
}

// ---- loopgate golden ----

void validate_golden_options(const GoldenOptions& o) {
  if (!o.capture_dir.empty()) return;  // the internal per-fixture worker: `golden --update` validated its launch
  LG_INPUT_CHECK(o.check != o.update, "golden: give exactly one of --check or --update{}",
                 o.check ? " (got both)" : "");
  LG_INPUT_CHECK(o.device == "cpu" || o.device == "cuda", "--device {}: must be cpu or cuda", quoted(o.device));
  std::vector<std::string> fixtures = o.fixtures;
  for (const std::string& f : o.fixtures) with_flag("--fixture", [&] { return find_fixture(f); });
  if (o.device == "cuda") {
    const int gpus = visible_gpu_count();  // InputError first where this loopgate has no GPU tier
    LG_INPUT_CHECK(gpus > 0, "--device cuda: no GPU visible");
    for (const std::string& f : o.fixtures)
      LG_INPUT_CHECK(find_fixture(f).world <= gpus, "--fixture {}: needs {} GPUs (one per rank), {} visible", f,
                     find_fixture(f).world, gpus);
  }
  if (fixtures.empty())
    for (const Fixture& f : all_fixtures())
      if (o.device == "cpu" || f.world <= visible_gpu_count()) fixtures.push_back(f.name);
  check_launcher("--mpiexec", o.mpiexec);
  const std::string& g = o.golden_dir;
  if (o.update) {
    check_output_dir("--golden-dir", g);
    return;
  }
  auto need = [&](const std::string& rel) {
    struct stat st;
    const std::string p = g + "/" + rel;
    LG_INPUT_CHECK(stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), R_OK) == 0,
                   "--golden-dir {}: {} is missing or unreadable (make it with `loopgate golden --update`)", g, rel);
  };
  need("lr_sequences.json");
  need("sync_budgets.json");
  for (const std::string& fx : fixtures) {
    need(fx + "/golden_values_" + o.device + ".json");
    need(fx + "/environment_" + o.device + ".json");
  }
}

// ---- loopgate ab, compare ----

void validate_ab_options(const AbOptions& o) {
  LG_INPUT_CHECK(o.alpha > 0 && o.alpha < 1, "--alpha {}: must be in (0, 1)", o.alpha);
  check_step_time_options(o.step);
  check_input_file("A", o.a);
  check_input_file("B", o.b);
  if (!o.json_path.empty()) check_output_file("--json", o.json_path);
}

void validate_ab_phase_options(const AbPhaseOptions& o, int world) {
  const RunFlags& f = o.run.flags;
  LG_INPUT_CHECK(!f.iters, "--iters {}: ab sets the run length itself (2 x --phases x --phase-iters)", *f.iters);
  LG_INPUT_CHECK(!f.trace, "--trace {}: ab writes no Trace (use --json)", *f.trace);
  LG_INPUT_CHECK(!f.inject, "--inject {}: ab times clean runs", *f.inject);
  LG_INPUT_CHECK(!f.syncs, "--syncs: ab times the loop without per-site counting (use loopgate run --syncs)");
  LG_INPUT_CHECK(f.arm == "baseline", "--arm {}: ab takes its two arms as --arms A,B", f.arm);
  const AbArm a = parse_ab_arm(o.arm_a);
  const AbArm b = parse_ab_arm(o.arm_b);
  LG_INPUT_CHECK(!o.run.config.cuda_graph_iteration || a.arm->on_device || b.arm->on_device,
                 "--cuda-graph iteration with --arms {},{}: neither reads nothing between log points (zerosync "
                 "does), so no iteration would replay", o.arm_a, o.arm_b);
  LG_INPUT_CHECK(o.arm_a != o.arm_b, "--arms {},{}: two different arms", o.arm_a, o.arm_b);
  LG_INPUT_CHECK(o.phases >= 3, "--phases {}: need >= 3 per arm (the first is warm-up; the test needs 2 samples a side)",
                 o.phases);
  LG_INPUT_CHECK(o.phase_iters >= 1, "--phase-iters {}: must be >= 1", o.phase_iters);
  const int log_interval = o.run.config.log_interval;
  LG_INPUT_CHECK(o.phase_iters % log_interval == 0,
                 "--phase-iters {}: must be a multiple of --log-interval {} (arms change at log points)", o.phase_iters,
                 log_interval);
  LG_INPUT_CHECK(o.alpha > 0 && o.alpha < 1, "--alpha {}: must be in (0, 1)", o.alpha);
  if (!o.json_path.empty()) check_output_file("--json", o.json_path);
  RunOptions run = o.run;
  run.config.train_iters = 2 * o.phases * o.phase_iters;
  validate_run_options(run, world);
}

AbArm parse_ab_arm(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  AbArm out;
  out.arm = &with_flag("--arms", [&]() -> const Arm& { return find_arm(name); });
  if (colon != std::string::npos) {
    const std::string suffix = spec.substr(colon + 1);
    LG_INPUT_CHECK(suffix == "bare" || suffix == "digests",
                   "--arms: '{}': the suffixes are :bare (the arm with loopgate's bookkeeping off) and :digests (the "
                   "arm taking digests), got ':{}'", spec, suffix);
    out.instrumented = suffix != "bare";
    out.digests = suffix == "digests";
  }
  return out;
}

void validate_compare_options(const CompareOptions& o) {
  LG_INPUT_CHECK(!o.a.empty() && !o.b.empty(), "compare needs at least one file for --a and one for --b");
  LG_INPUT_CHECK(o.early >= 1, "--early {}: must be >= 1", o.early);
  LG_INPUT_CHECK(o.alpha > 0 && o.alpha < 1, "--alpha {}: must be in (0, 1)", o.alpha);
  check_step_time_options(o.step);
  for (const std::string& p : o.a) check_input_file("--a", p);
  for (const std::string& p : o.b) check_input_file("--b", p);
  if (!o.json_path.empty()) check_output_file("--json", o.json_path);
}

bool input_agreed_ok(const std::string& problem, int rank, int size, const char* program) {
  int first_bad = problem.empty() ? size : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_bad < size && rank == first_bad) {
    std::fprintf(stderr, "%s: error: %s\n", program, problem.c_str());
    std::fflush(stderr);
  }
  return first_bad == size;
}

}  // namespace loopgate
