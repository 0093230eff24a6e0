// The arms: the seed's commits as policy lists, onesync, and the catalogue of planted defects — one per property a
// gate claims (docs/gates.md), each a single policy set wrongly or one small hook, named after what it breaks.
#include "trainer/loop/arms.h"

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <climits>
#include <memory>

#include "trainer/common/device.h"
#include "trainer/common/error.h"
#include "trainer/instrument/ledger.h"
#include "trainer/loop/config.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/instrument/device_cuda.h"
#endif

namespace loopgate {
namespace {

Arm syncfree(int commits) {
  Arm a;
  a.name = commits == 5 ? "syncfree" : fmt::format("syncfree-{}", commits);
  a.description = fmt::format("the seed's first {} commit(s)", commits);
  if (commits >= 1) a.nan_check = SyncMode::kDeferred;
  if (commits >= 2) a.stat_bundle = SyncMode::kDeferred;
  if (commits >= 3) a.device_scalars = SyncMode::kDeferred;
  if (commits >= 4) a.timers = SyncMode::kDeferred;
  if (commits >= 5) a.exit_vote = SyncMode::kDeferred;
  return a;
}

// A planted defect: syncfree with one thing wrong, and the gate that must reject it.
Arm defect(const std::string& name, const std::string& what, const std::string& gate, const std::string& fixture = "") {
  Arm a = syncfree(5);
  a.name = name;
  a.description = "planted defect: " + what;
  a.rejected_by = gate;
  a.fixture = fixture;
  return a;
}

// The timers' report hooks: each breaks one property of the stream (exactly once, in order, never 0).
void drop_second(std::vector<TimerInterval>& r) {
  if (r.size() >= 2) r.erase(r.begin() + 1);
}
void duplicate_first(std::vector<TimerInterval>& r) {
  if (!r.empty()) r.push_back(r.front());
}
void swap_first_two_of_a_timer(std::vector<TimerInterval>& r) {
  for (size_t i = 0; i < r.size(); ++i)
    for (size_t j = i + 1; j < r.size(); ++j)
      if (r[i].name == r[j].name) {
        std::swap(r[i], r[j]);
        return;
      }
}
void zero_interval_time(std::vector<TimerInterval>& r) {
  for (TimerInterval& t : r)
    if (t.name == "interval-time") t.seconds = 0.0;
}

std::vector<Arm> build_defects() {
  std::vector<Arm> d;
  Arm a;
  // ---- equivalence ----
  a = defect("defect-numerics", "the step uses a learning rate off by 2^-10", "equivalence");
  a.hooks.step_lr = [](double lr) { return lr * (1.0 + std::ldexp(1.0, -10)); };
  d.push_back(a);
  // ---- lr_schedule ----
  a = defect("defect-lr-on-skip", "the LR advances on a skipped step", "lr_schedule");
  a.lr_advances_on_skip = true;
  d.push_back(a);
  // ---- nan_detection ----
  a = defect("defect-nan-after-step", "the NaN verdict is acted on after optimizer.step", "nan_detection");
  a.verdict_after_step = true;
  d.push_back(a);
  // A decision the ranks do not share leaves them in different collectives: the job hangs, and the progress
  // watchdog must fail it within its limit, naming the rank (issue 15).
  a = defect("defect-nan-vote-local", "the rerun decision is not reduced over the world (each rank its own)",
             "nan_detection", "tp2sp");
  a.hangs = true;
  a.rerun_vote = VoteGroup::kThisRankOnly;
  d.push_back(a);
  // ---- zerosync's own: the mask and the LR table ----
  Arm zs = defect("defect-zerosync-mask-after-step", "zerosync applies a fault's mask one step late (after the step)",
                  "nan_detection");
  zs.on_device = true;
  zs.verdict_after_step = true;
  d.push_back(zs);
  zs = defect("defect-zerosync-lr-off-by-one", "zerosync indexes its LR table one step ahead", "lr_schedule");
  zs.on_device = true;
  zs.lr_table_shift = 1;
  d.push_back(zs);
  // Right in every eager run without a skipped step, so only a replay (or the CPU stand-in's operator-stream
  // check) can tell: the LR rides as a host scalar whose captured value a CUDA graph would keep.
  zs = defect("defect-graph-host-lr", "zerosync passes its LR as a host kernel argument (frozen in a CUDA graph)",
              "cuda_graph");
  zs.on_device = true;
  zs.lr_from_host = true;
  d.push_back(zs);
  // ---- fp16 ----
  // The ranks disagree on found_inf, but the masked step issues the same collectives either way (trainer/optim/
  // adam.h): the defect shows as parameters moving on a skipped step and diverging loss scales, not as a hang.
  a = defect("defect-found-inf-local", "optimizer.step's found_inf is not reduced: a rank skips on its own overflow only",
             "fp16", "tp2sp");
  a.found_inf_vote = FoundInfVote::kThisRankOnly;
  d.push_back(a);
  a = defect("defect-found-inf-tp-group", "optimizer.step's found_inf is reduced over the TP group, not TP x PP",
             "fp16", "pp2");
  a.found_inf_vote = FoundInfVote::kTensorParallelGroup;
  d.push_back(a);
  // ---- timers ----
  a = defect("defect-drop-timer-interval", "one timer interval is never reported", "timers");
  a.hooks.timer_report = drop_second;
  d.push_back(a);
  a = defect("defect-duplicate-timer-interval", "one timer interval is reported twice", "timers");
  a.hooks.timer_report = duplicate_first;
  d.push_back(a);
  a = defect("defect-reorder-timer-intervals", "two timer intervals are reported out of order", "timers");
  a.hooks.timer_report = swap_first_two_of_a_timer;
  d.push_back(a);
  a = defect("defect-zero-timer-window", "the interval-time window is reported as 0 s", "timers");
  a.hooks.timer_report = zero_interval_time;
  d.push_back(a);
  a = defect("defect-timer-whatever-completed",
             "deferred timers report whatever has completed (0.0 lines, doubled windows)", "timers");
  a.timer_report = TimerReport::kWhateverCompleted;
  d.push_back(a);
  a = defect("defect-timer-first-no-wait", "the first timer report does not wait (a 0.0 first line)", "timers");
  a.timer_report = TimerReport::kFirstReportNoWait;
  d.push_back(a);
  a = defect("defect-timer-unbounded", "the pending-event bound is 4096, not the specification's 1024", "timers");
  a.timer_max_pending = 4096;
  d.push_back(a);
  // ---- logging_exit ----
  a = defect("defect-stale-log", "the batched read reports the previous log point's grad norm", "logging_exit");
  a.hooks.logged_grad_norm = [](double, double previous) { return previous; };
  d.push_back(a);
  a = defect("defect-exit-vote-local", "the exit-duration vote is not reduced over the world (one rank leaves)",
             "logging_exit", "tp2sp");
  a.hangs = true;
  a.exit_vote_group = VoteGroup::kThisRankOnly;
  d.push_back(a);
  // ---- sync_budget ----
  a = defect("defect-extra-read", "a hidden extra host read per iteration", "sync_budget");
  a.hooks.after_training_log = [](Ledger& ledger, const LogInputs& in) { ledger.read(Site::kLossScale, in.loss_scale); };
  d.push_back(a);
  // A deferred NaN check that picks out the bad values with a boolean mask: no read the source scan can spell (the
  // mask's nonzero sizes the output from the device), a host sync on CUDA. The operator counter's sync rule must
  // count it at nan_check_grad, where syncfree reads nothing.
  a = defect("defect-data-dependent-read", "a boolean-mask index in a deferred NaN check: its output size is read "
             "from the device (a host sync on CUDA that no spelling shows)", "sync_budget");
  a.hooks.after_training_log = [](Ledger&, const LogInputs& in) {
    ScopedSite scope(site_name(Site::kNanCheckGrad));
    at::Tensor bad = in.loss_scale.index({at::isnan(in.loss_scale)});
    (void)bad;
  };
  d.push_back(a);
  a = defect("defect-mask-per-tensor",
             "zerosync's masked step selects, then copies: one operator more per tensor than the baseline's step",
             "sync_budget");
  a.on_device = true;
  a.mask_write = Adam::MaskWrite::kSelectThenCopy;
  d.push_back(a);
  a = defect("defect-nan-predicate", "deferred NaN checks bank a predicate per check: more launches than the baseline",
             "sync_budget");
  a.nan_bank = NanBank::kPredicate;
  d.push_back(a);
  // ---- isolation ----
  // State that outlives its run: the hooks count the runs this process has made (a new run starts when the
  // iteration goes back), and from the second run on the step's LR is one part in 2^20 larger. Its first run is
  // the baseline's; only a scenario repeated in the same process (the gate's shared process) shows it.
  a = defect("defect-state-leak", "a hook whose state outlives its run: from the process's second run on, the "
             "step's LR is 1 + 2^-20 times the scheduler's", "isolation");
  a.stat_bundle = a.device_scalars = a.timers = a.exit_vote = a.nan_check = SyncMode::kEager;  // baseline policies
  {
    struct RunsSeen {
      int64_t runs = -1, last_iteration = INT64_MAX;
    };
    auto seen = std::make_shared<RunsSeen>();
    a.hooks.after_training_log = [seen](Ledger&, const LogInputs& in) {
      if (in.iteration < seen->last_iteration) ++seen->runs;
      seen->last_iteration = in.iteration;
    };
    a.hooks.step_lr = [seen](double lr) { return seen->runs > 0 ? lr * (1.0 + std::ldexp(1.0, -20)) : lr; };
  }
  d.push_back(a);
  // ---- schedule ----
  // One forward more in 1F1B's warmup on every stage: the p2p sends and receives still pair up and every stage
  // still runs its backwards in microbatch order, so the numerics are the baseline's bits; only the executed
  // schedule in the Trace shows it.
  a = defect("defect-schedule-warmup", "1F1B runs one warmup forward too many on every stage (same numerics)",
             "schedule", "pp2");
  a.schedule_warmup_shift = 1;
  d.push_back(a);
  // ---- ledger == CUPTI (GPU only) ----
  a = defect("defect-hidden-sync", "a device synchronize outside the ledger per iteration (only CUPTI sees it)",
             "ledger_cupti");
  a.gpu_only = true;
  a.hooks.after_training_log = [](Ledger&, const LogInputs&) {
#if LOOPGATE_HAS_CUDA
    if (run_device().is_cuda()) cuda_device_synchronize();  // what a stray torch.cuda.synchronize() does
#endif
  };
  d.push_back(a);
  return d;
}

std::vector<Arm> build_arms() {
  std::vector<Arm> arms;
  Arm base;
  base.name = "baseline";
  base.description = "every site read eagerly (Megatron HEAD)";
  arms.push_back(base);
  for (int k = 1; k <= 4; ++k) arms.push_back(syncfree(k));
  Arm s5 = syncfree(5);
  s5.name = "syncfree-5";
  arms.push_back(s5);
  arms.push_back(syncfree(5));
  Arm one = syncfree(5);
  one.name = "onesync";
  one.description = "rerun verdict, update_successful, stat bundle and exit vote in one collective and one read";
  one.one_read = true;
  arms.push_back(one);
  Arm zero = syncfree(5);
  zero.name = "zerosync";
  zero.description = "no host read between log points: the iteration's decisions and counters stay on the device";
  zero.on_device = true;
  arms.push_back(zero);
  for (Arm& d : build_defects()) arms.push_back(std::move(d));
  return arms;
}

// Built-in arms first, registered ones appended. Built on first use, so a registration from another file's
// static initializer finds the built-in arms whatever the initialization order.
std::vector<Arm>& arm_registry() {
  static std::vector<Arm> arms = build_arms();
  return arms;
}

}  // namespace

const std::vector<Arm>& all_arms() { return arm_registry(); }

const Arm& find_arm(const std::string& name) {
  std::string known;
  for (const Arm& a : all_arms()) {
    if (a.name == name) return a;
    known += (known.empty() ? "" : ", ") + a.name;
  }
  throw InputError(fmt::format("unknown arm '{}' (known: {})", name, known));
}

std::vector<std::string> default_candidates() {
  return {"syncfree-1", "syncfree-2", "syncfree-3", "syncfree-4", "syncfree", "onesync", "zerosync"};
}

std::vector<const Arm*> planted_defects() {
  std::vector<const Arm*> out;
  for (const Arm& a : all_arms())
    if (!a.rejected_by.empty()) out.push_back(&a);
  return out;
}

void register_arm(Arm arm) {
  const std::string& n = arm.name;
  LG_INPUT_CHECK(!n.empty(), "register_arm: the arm has no name");
  // GoogleTest names each parameterized gate test after the arm ('-' -> '_', param_name): letters, digits and '-'
  // keep those names valid and distinct.
  LG_INPUT_CHECK(std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }),
                 "register_arm: arm name '{}' may hold only letters, digits and '-'", n);
  for (const Arm& a : arm_registry())
    LG_INPUT_CHECK(a.name != n, "register_arm: an arm named '{}' is already registered", n);
  arm_registry().push_back(std::move(arm));
}

ArmRegistrar::ArmRegistrar(Arm arm) {
  try {
    register_arm(std::move(arm));
  } catch (const InputError& e) {  // before main: nobody else can print it
    std::fprintf(stderr, "loopgate: error: %s\n", e.what());
    std::exit(2);
  }
}

}  // namespace loopgate
