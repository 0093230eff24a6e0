#include "trainer/loop/arms.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "trainer/common/error.h"

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

Arm defect_arm(const std::string& name, Defect d, const std::string& what) {
  Arm a = syncfree(5);
  a.name = name;
  a.description = "planted defect: " + what;
  a.defect = d;
  return a;
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
  arms.push_back(defect_arm("defect-nan-after-step", Defect::kNanVerdictAfterStep,
                            "the NaN verdict is acted on after optimizer.step"));
  arms.push_back(defect_arm("defect-drop-timer-interval", Defect::kDropTimerInterval,
                            "one timer interval is never reported"));
  arms.push_back(defect_arm("defect-lr-on-skip", Defect::kLrOnSkip, "the LR advances on a skipped step"));
  arms.push_back(defect_arm("defect-extra-read", Defect::kHiddenExtraRead, "a hidden extra host read per iteration"));
  arms.push_back(defect_arm("defect-numerics", Defect::kPerturbNumerics, "the step uses a learning rate off by 2^-10"));
  arms.push_back(defect_arm("defect-stale-log", Defect::kBatchedReadStale,
                            "the batched read reports a stale grad norm"));
  Arm whatever = defect_arm("defect-timer-whatever-completed", Defect::kNone,
                            "deferred timers report whatever has completed (0.0 lines, doubled windows)");
  whatever.timer_report = TimerReport::kWhateverCompleted;
  arms.push_back(whatever);
  Arm predicate = defect_arm("defect-nan-predicate", Defect::kNone,
                             "deferred NaN checks bank a predicate per check: more launches than the baseline");
  predicate.nan_bank = NanBank::kPredicate;
  arms.push_back(predicate);
  arms.push_back(defect_arm("defect-hidden-sync", Defect::kHiddenSync,
                            "a device synchronize outside the ledger per iteration (only CUPTI sees it)"));
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
  return {"syncfree-1", "syncfree-2", "syncfree-3", "syncfree-4", "syncfree", "onesync"};
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

const char* defect_name(Defect d) {
  switch (d) {
    case Defect::kNone: return "none";
    case Defect::kNanVerdictAfterStep: return "nan-verdict-after-step";
    case Defect::kDropTimerInterval: return "drop-timer-interval";
    case Defect::kLrOnSkip: return "lr-on-skip";
    case Defect::kHiddenExtraRead: return "hidden-extra-read";
    case Defect::kPerturbNumerics: return "perturb-numerics";
    case Defect::kBatchedReadStale: return "batched-read-stale";
    case Defect::kHiddenSync: return "hidden-sync";
  }
  return "?";
}

}  // namespace loopgate
