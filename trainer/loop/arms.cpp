// The arms: the seed's commits as policy lists, onesync and zerosync; and the registry that arms from outside the
// trainer join (the test side's planted defects, a user's own arms).
#include "trainer/loop/arms.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "trainer/common/error.h"
#include "trainer/loop/log_stats.h"

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

CollectiveChanges changed_collectives(const Arm& a) {
  CollectiveChanges c;
  std::set<std::string>& s = c.scopes;
  auto deferred = [&](SyncMode m, std::initializer_list<const char*> sites) {
    if (m == SyncMode::kDeferred) s.insert(sites.begin(), sites.end());
  };
  deferred(a.nan_check, {"nan_check_loss", "nan_check_grad", "rerun_decision"});
  if (a.stat_bundle == SyncMode::kDeferred)
    for (const LogStat& stat : log_stats()) s.insert(site_name(stat.site));  // the stats' sites (log_stats.h)
  deferred(a.stat_bundle, {"loss_report", "batched_log_read"});
  deferred(a.device_scalars, {"loss_accum_seed", "learning_rate", "batched_log_read"});
  deferred(a.timers, {"timers"});
  deferred(a.exit_vote, {"exit_vote", "batched_log_read"});
  if (a.one_read) s.insert({"rerun_decision", "update_successful", "onesync_read"});
  if (a.on_device) s.insert({"rerun_decision", "update_successful", "batched_log_read"});
  c.masked_step = a.one_read || a.on_device;
  return c;
}

std::vector<std::string> default_candidates() {
  return {"syncfree-1", "syncfree-2", "syncfree-3", "syncfree-4", "syncfree", "onesync", "zerosync"};
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
