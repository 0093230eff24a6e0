// Gate: sync_budget. Host reads per site per iteration (the ledger's counts, every rank) stay within
// golden/sync_budgets.json for every arm: per fixture, per scenario (log interval 1 = the shared clean run;
// log interval 3 with the exit-duration vote live, shared with logging_exit), per iteration category (first_iteration, log, nonlog),
// per site; a site absent from the budget allows 0. An arm golden/ does not record (a registered arm) is held to
// the recorded arm with the same sync policies, site by site, else to the baseline's budget in total per iteration
// (it may move reads between sites, not add any). And the table has the seed's shape, checked from the
// counts themselves (not from the budget file): the baseline reads every site every iteration; each
// syncfree-k reads none of its first k commits' sites and exactly the baseline's count of the later commits'
// sites; syncfree keeps only rerun_decision, update_successful and batched_log_read (the latter at log
// iterations only); onesync reads once per iteration (onesync_read), besides the timers' one-time
// first-report wait at iteration 1 (printed with its count).
// On dp64 one scenario (log interval 3, 3 iterations) for the baseline and the final arms (gate_arms()).
// Power: defect-extra-read (one hidden read per iteration) is rejected against syncfree's budget.
// Not proven here: that the ledger sees every real sync (on GPU the CUPTI counter reconciles that).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "fixtures/golden.h"
#include "fixtures/harness/args.h"
#include "fixtures/compare.h"
#include "fixtures/harness/arm_test.h"
#include "fixtures/scenarios.h"
#include "trainer/measure/ledger.h"
#include "trainer/optim/adam.h"

namespace loopgate {
namespace {

using nlohmann::json;

// dp64 (64 ranks on 2 cores) checks the baseline and gate_arms() (scenarios.h); 8 ranks check every arm.
bool dp64_arm(const std::string& arm) { return arm == "baseline" || in_gate_arms(arm); }

const json& budgets() {
  static const json j = read_json_file(harness_arg("golden_dir", default_golden_dir()) + "/sync_budgets.json");
  return j;
}

const ScenarioResult& sync_run(const SyncScenario& s, const std::string& arm) {
  if (s.key == "log_interval_1") return clean_run(arm);  // shared with the other gates
  return run_scenario("sync:" + s.key, sync_scenario_config(gate_fixture(), s), arm);
}

int64_t reads(const IterationRecord& r, const std::string& site) {
  auto it = r.reads_per_site.find(site);
  return it == r.reads_per_site.end() ? 0 : it->second;
}

// How an arm is held to a budget: site by site (an arm golden/ records), or per iteration in total (an arm it
// does not know, held to the baseline's: it may move reads and launches between sites — a deferred arm reads at
// batched_log_read, which the baseline never does — but not add any).
enum class BudgetRule { kPerSite, kTotal };

// One record's counts per site (reads or operators) above one iteration category's budget, one line each, each
// line prefixed with `where`. Operators of the Trace's own checksums (diagnostic_checksum) are no loop work: with
// unit "operators" that site is not counted.
std::vector<std::string> over_category(const std::map<std::string, int64_t>& counts, const json& budget,
                                       BudgetRule rule, const std::string& where, const std::string& unit) {
  const std::string ignored = unit == "operators" ? "diagnostic_checksum" : "";
  std::vector<std::string> out;
  int64_t total = 0, allowed_total = 0;
  for (const auto& [site, n] : counts) {
    if (site == ignored) continue;
    total += n;
    const int64_t allowed = budget.value(site, int64_t{0});
    if (rule == BudgetRule::kPerSite && n > allowed)
      out.push_back(fmt::format("{} site {}: {} {} > budget {}", where, site, n, unit, allowed));
  }
  for (const auto& [site, n] : budget.items())
    if (site != ignored) allowed_total += n.get<int64_t>();
  if (rule == BudgetRule::kTotal && total > allowed_total)
    out.push_back(fmt::format("{}: {} {} in all > budget {} in all", where, total, unit, allowed_total));
  return out;
}

// Every (iteration, rank, site) of `arm`'s runs above `budget_arm`'s budget (kTotal: every (iteration, rank)).
std::vector<std::string> over_budget(const std::string& arm, const std::string& budget_arm,
                                     BudgetRule rule = BudgetRule::kPerSite) {
  std::vector<std::string> out;
  const std::string fx = gate_fixture();
  for (const SyncScenario& s : sync_scenarios(fx)) {
    const json* b = find_sync_budget(budgets(), fx, s.key, budget_arm);
    if (!b) {
      out.push_back(fmt::format("no budget for fixture {} scenario {} arm {} (run `loopgate golden --update`)", fx,
                                s.key, budget_arm));
      continue;
    }
    for (const IterationRecord& r : sync_run(s, arm).trace.records) {
      std::string cat = iteration_category(r.iteration, s.log_interval);
      auto m = over_category(r.reads_per_site, (*b)[cat], rule,
                             fmt::format("{} iteration {} ({}) rank {}", s.key, r.iteration, cat, r.rank), "reads");
      out.insert(out.end(), m.begin(), m.end());
    }
  }
  return out;
}

// The budget an arm is held to, site by site: its own where golden/ records one; else that of the recorded arm
// with the same sync policies (a planted defect or a user's arm built on syncfree reads what syncfree may read,
// so one hidden read more is caught); else — a combination golden/ has never seen — the baseline's, in total per
// iteration (at most what the baseline reads and launches).
bool same_sync_policies(const Arm& a, const Arm& b) {
  return a.nan_check == b.nan_check && a.stat_bundle == b.stat_bundle && a.device_scalars == b.device_scalars &&
         a.timers == b.timers && a.exit_vote == b.exit_vote && a.one_read == b.one_read && a.on_device == b.on_device;
}
std::string recorded_arm_like(const std::string& arm) {
  const std::vector<std::string> known = budget_arms();
  if (std::find(known.begin(), known.end(), arm) != known.end()) return arm;
  for (const std::string& k : known)
    if (same_sync_policies(find_arm(k), find_arm(arm))) return k;
  return "";
}
std::string budget_arm_for(const std::string& arm) {
  const std::string like = recorded_arm_like(arm);
  return like.empty() ? "baseline" : like;
}
BudgetRule budget_rule_for(const std::string& arm) {
  return recorded_arm_like(arm).empty() ? BudgetRule::kTotal : BudgetRule::kPerSite;
}

std::vector<std::string> arms_with_baseline() {
  std::vector<std::string> a = {"baseline"};
  for (const std::string& c : candidate_arms()) a.push_back(c);
  return a;
}

class SyncBudget : public ArmTest {};

TEST_P(SyncBudget, ReadsPerSitePerIterationWithinGoldenBudget) {
  if (heavy_fixture() && !dp64_arm(GetParam())) GTEST_SKIP() << "dp64: budgets checked for the baseline and the final arms";
  auto m = over_budget(GetParam(), budget_arm_for(GetParam()), budget_rule_for(GetParam()));
  EXPECT_TRUE(m.empty()) << GetParam() << ": " << m.size() << " reads over budget" << first_lines(m);
}

// The seed's per-commit table, from the counts: which commit removes which sites.
const std::vector<std::vector<std::string>>& commit_sites() {
  static const std::vector<std::vector<std::string>> c = {
      {"nan_check_loss", "nan_check_grad"},
      {"grad_norm", "num_zeros", "params_norm", "loss_scale", "loss_report"},
      {"learning_rate", "loss_accum_seed"},
      {"timers"},
      {"exit_vote"}};
  return c;
}

int commits_of(const std::string& arm) {
  if (arm == "baseline") return 0;
  if (arm == "syncfree") return 5;
  if (arm.rfind("syncfree-", 0) == 0) return std::stoi(arm.substr(9));
  return -1;  // onesync and user arms: no commit shape
}

// The scenario with every site live: the exit vote on, log and non-log iterations.
const SyncScenario& shape_scenario() {
  static const SyncScenario s = logged_scenario(gate_fixture());
  return s;
}

TEST_P(SyncBudget, TableHasTheSeedsPerCommitShape) {
  const std::string arm = GetParam();
  if (heavy_fixture() && !dp64_arm(arm)) GTEST_SKIP() << "dp64: shape checked for the baseline and the final arms";
  const int k = commits_of(arm);
  if (k < 0) GTEST_SKIP() << arm << " is not one of the seed's commits (its own test covers it)";
  const SyncScenario& s = shape_scenario();
  const Trace& base = sync_run(s, "baseline").trace;
  const Trace& t = sync_run(s, arm).trace;
  const int last = world_size() - 1;
  std::vector<std::string> bad;
  for (const IterationRecord& r : t.records) {
    if (r.iteration == 1) continue;  // not validated; the timers' first-report wait
    const bool log = r.iteration % s.log_interval == 0;
    const IterationRecord* b = base.find(r.iteration, r.rank);
    if (!b) {
      bad.push_back(fmt::format("iteration {} rank {}: no baseline record", r.iteration, r.rank));
      continue;
    }
    if (k == 0) {
      std::vector<std::string> every = {"rerun_decision", "nan_check_grad", "update_successful", "grad_norm",
                                        "num_zeros",      "params_norm",    "loss_scale",        "learning_rate",
                                        "timers",         "exit_vote"};
      if (r.rank == last) {
        every.push_back("nan_check_loss");
        every.push_back("loss_accum_seed");
        if (log) every.push_back("loss_report");
      }
      for (const std::string& site : every)
        if (reads(r, site) == 0) bad.push_back(fmt::format("baseline iteration {} rank {}: no read at {}", r.iteration, r.rank, site));
      for (const char* site : {"batched_log_read", "onesync_read"})
        if (reads(r, site) != 0) bad.push_back(fmt::format("baseline iteration {} rank {}: reads {}", r.iteration, r.rank, site));
      continue;
    }
    for (int c = 0; c < 5; ++c) {
      for (const std::string& site : commit_sites()[c]) {
        int64_t n = reads(r, site), want = c < k ? 0 : reads(*b, site);
        if (n != want)
          bad.push_back(fmt::format("{} iteration {} rank {} site {} (commit {}): {} reads, expected {}", arm,
                                    r.iteration, r.rank, site, c + 1, n, want));
      }
    }
    if (k == 5) {
      for (const auto& [site, n] : r.reads_per_site)
        if (n > 0 && site != "rerun_decision" && site != "update_successful" && site != "batched_log_read")
          bad.push_back(fmt::format("syncfree iteration {} rank {}: reads {} ({})", r.iteration, r.rank, site, n));
      if ((reads(r, "batched_log_read") > 0) != log)
        bad.push_back(fmt::format("syncfree iteration {} rank {}: batched_log_read {} at a {} iteration", r.iteration,
                                  r.rank, reads(r, "batched_log_read"), log ? "log" : "non-log"));
    }
  }
  EXPECT_TRUE(bad.empty()) << arm << " (" << s.key << "): " << bad.size() << " departures from the seed's table"
                           << first_lines(bad);
}

INSTANTIATE_TEST_SUITE_P(Arms, SyncBudget, ::testing::ValuesIn(arms_with_baseline()),
                         [](const auto& info) { return param_name(info.param); });

TEST(SyncBudget, OnesyncAtMostOneReadPerIteration) {
  std::vector<std::string> bad;
  int64_t first_waits = 0;
  for (const SyncScenario& s : sync_scenarios(gate_fixture())) {
    for (const IterationRecord& r : sync_run(s, "onesync").trace.records) {
      int64_t total = 0;
      for (const auto& [site, n] : r.reads_per_site) total += n;
      int64_t timers = reads(r, "timers");
      if (r.iteration == 1) first_waits = std::max(first_waits, timers);
      int64_t counted = r.iteration == 1 ? total - timers : total;
      if (counted > 1 || reads(r, "onesync_read") != 1)
        bad.push_back(fmt::format("{} iteration {} rank {}: {} reads ({} at onesync_read, {} at timers)", s.key,
                                  r.iteration, r.rank, total, reads(r, "onesync_read"), timers));
    }
  }
  EXPECT_TRUE(bad.empty()) << bad.size() << " iterations with more than one read" << first_lines(bad);
  if (world_rank() == 0)
    std::printf("onesync: 1 read per iteration; iteration 1 adds the timers' first-report wait: %lld read(s) at "
                "timers (max over ranks)\n", static_cast<long long>(first_waits));
}

// ---- launches: operators dispatched per site per iteration (the CPU launch proxy; CUPTI on a GPU) ----

// The launch budget of `budget_arm` for this fixture and scenario, or null (reason in *why): golden's, when it was
// made with this LibTorch; else (a GPU runner's LibTorch decomposes operators differently) the budget arm's own
// counts measured here, in this launch, the same way `loopgate golden --update` makes golden's. `here`: this
// LibTorch's version (a test may name another, to take the GPU runner's path on CPU).
const json* launch_budget(const SyncScenario& s, const std::string& budget_arm, std::string* why,
                          const std::string& here) {
  std::string made_with;
  const json* b = find_launch_budget(budgets(), gate_fixture(), s.key, budget_arm, &made_with);
  if (!b) {
    *why = fmt::format("no launch budget for fixture {} scenario {} arm {} (run `loopgate golden --update`)",
                       gate_fixture(), s.key, budget_arm);
    return nullptr;
  }
  if (made_with == here) return b;
  static std::map<std::string, json> measured;
  const std::string key = s.key + "|" + budget_arm;
  auto it = measured.find(key);
  if (it == measured.end())
    it = measured.emplace(key, budget_from_trace(sync_run(s, budget_arm).trace, s.log_interval,
                                                 &IterationRecord::launches_per_site)).first;
  return &it->second;
}

// Every (iteration, rank, site) of `arm`'s runs with more operators than `budget_arm`'s golden launch budget
// (kTotal: every steady-state (iteration, rank) — iteration 1 holds the one-time setup of deferred sites, which
// the baseline's budget has no room for; more_launches_than_baseline below excludes it for the same reason).
std::vector<std::string> over_launch_budget(const std::string& arm, const std::string& budget_arm, BudgetRule rule,
                                            const std::string& here = environment_info().at("torch_version")) {
  std::vector<std::string> out;
  for (const SyncScenario& s : sync_scenarios(gate_fixture())) {
    std::string why;
    const json* b = launch_budget(s, budget_arm, &why, here);
    if (!b) {
      out.push_back(why);
      continue;
    }
    for (const IterationRecord& r : sync_run(s, arm).trace.records) {
      if (rule == BudgetRule::kTotal && r.iteration < 2) continue;
      const std::string cat = iteration_category(r.iteration, s.log_interval);
      auto m = over_category(r.launches_per_site, (*b)[cat], rule,
                             fmt::format("{} iteration {} ({}) rank {}", s.key, r.iteration, cat, r.rank), "operators");
      out.insert(out.end(), m.begin(), m.end());
    }
  }
  return out;
}

// Every steady-state (iteration >= 2, rank) where `arm` dispatched more operators than the baseline did. The
// first iteration is excluded: it holds the timers' first report and one-time setup of the deferred sites.
std::vector<std::string> more_launches_than_baseline(const std::string& arm) {
  std::vector<std::string> out;
  for (const SyncScenario& s : sync_scenarios(gate_fixture())) {
    const Trace& base = sync_run(s, "baseline").trace;
    for (const IterationRecord& r : sync_run(s, arm).trace.records) {
      if (r.iteration < 2) continue;
      const IterationRecord* b = base.find(r.iteration, r.rank);
      if (!b) {
        out.push_back(fmt::format("{} iteration {} rank {}: no baseline record", s.key, r.iteration, r.rank));
        continue;
      }
      const int64_t n = launches_excluding_diagnostics(r), nb = launches_excluding_diagnostics(*b);
      if (n == 0 || nb == 0) out.push_back(fmt::format("{} iteration {} rank {}: no operators counted", s.key, r.iteration, r.rank));
      if (n > nb)
        out.push_back(fmt::format("{} iteration {} ({}) rank {}: {} operators, baseline {} (+{})", s.key, r.iteration,
                                  iteration_category(r.iteration, s.log_interval), r.rank, n, nb, n - nb));
    }
  }
  return out;
}

TEST_P(SyncBudget, NoMoreLaunchesPerIterationThanTheBaseline) {
  if (GetParam() == "baseline") GTEST_SKIP() << "the baseline is the reference";
  if (heavy_fixture() && !dp64_arm(GetParam())) GTEST_SKIP() << "dp64: launches checked for the final arms";
  auto m = more_launches_than_baseline(GetParam());
  EXPECT_TRUE(m.empty()) << GetParam() << " trades syncs for launches: " << m.size() << " iteration(s)" << first_lines(m);
}

// The launch budget was made with one LibTorch's operator decompositions; elsewhere (a GPU runner's LibTorch)
// the relative rule above still holds, and CUPTI counts the kernels themselves.
TEST_P(SyncBudget, LaunchesPerSitePerIterationWithinGoldenBudget) {
  if (heavy_fixture() && !dp64_arm(GetParam())) GTEST_SKIP() << "dp64: launch budgets checked for the final arms";
  const std::string fx = gate_fixture();
  const std::string here = environment_info().at("torch_version");
  for (const SyncScenario& s : sync_scenarios(fx)) {
    std::string made_with;
    if (find_launch_budget(budgets(), fx, s.key, budget_arm_for(GetParam()), &made_with) && made_with != here &&
        budget_arm_for(GetParam()) == GetParam())
      GTEST_SKIP() << "launch budgets were made with LibTorch " << made_with << ", this is " << here
                   << ": operator counts differ between versions, and a budget measured here would be this arm's own";
  }
  auto m = over_launch_budget(GetParam(), budget_arm_for(GetParam()), budget_rule_for(GetParam()));
  EXPECT_TRUE(m.empty()) << GetParam() << ": " << m.size() << " sites over the launch budget" << first_lines(m);
}

// The numerics path is the same code in every arm: a device-masked step (onesync, zerosync) counts its own fixed
// few operators at site step_mask (kStepMaskSite: the mask, the clip coefficient held at 1, the step count's
// advance), so at site `numerics` a candidate may dispatch no more operators than the baseline, per steady
// iteration and rank. A mask written per tensor shows here: on an H200 a select-then-copy mask cost ~410 kernels per
// iteration more than the baseline while the totals still passed (the baseline's reads left slack). The allowance
// was a constant 8 operators before the mask had a site of its own; on a GPU the mask's operators are more (each
// fresh output is also filled: deterministic mode's fill of uninitialized memory), so a constant could not fit both.
std::vector<std::string> numerics_over_baseline(const std::string& arm) {
  std::vector<std::string> out;
  for (const SyncScenario& s : sync_scenarios(gate_fixture())) {
    const Trace& base = sync_run(s, "baseline").trace;
    for (const IterationRecord& r : sync_run(s, arm).trace.records) {
      const IterationRecord* b = base.find(r.iteration, r.rank);
      if (r.iteration < 2 || !b) continue;  // a missing record: more_launches_than_baseline reports it
      auto at = [](const IterationRecord& x, const char* site) {
        auto it = x.launches_per_site.find(site);
        return it == x.launches_per_site.end() ? int64_t{0} : it->second;
      };
      if (at(r, "numerics") > at(*b, "numerics"))
        out.push_back(fmt::format("{} iteration {} rank {}: {} operators on the numerics path, baseline {} (+{}; the "
                                  "step mask's own {} are counted apart)", s.key, r.iteration, r.rank,
                                  at(r, "numerics"), at(*b, "numerics"), at(r, "numerics") - at(*b, "numerics"),
                                  at(r, kStepMaskSite)));
    }
  }
  return out;
}

TEST_P(SyncBudget, NumericsPathNoMoreOperatorsThanTheBaselines) {
  if (GetParam() == "baseline") GTEST_SKIP() << "the baseline is the reference";
  if (heavy_fixture() && !dp64_arm(GetParam())) GTEST_SKIP() << "dp64: launches checked for the final arms";
  auto m = numerics_over_baseline(GetParam());
  EXPECT_TRUE(m.empty()) << GetParam() << " adds operators to the numerics path" << first_lines(m);
}

TEST(GatePower, SyncBudgetRejectsAPerTensorMask) {
  auto m = numerics_over_baseline("defect-mask-per-tensor");
  EXPECT_FALSE(m.empty()) << "the sync budget accepted a masked step with an extra operator per tensor";
  if (!m.empty() && world_rank() == 0) std::printf("rejected as expected:%s\n", first_lines(m, 2).c_str());
}

// Gate power: deferred NaN checks that bank a predicate per check (the seed's first form) launch more than the
// baseline; the rule must reject them.
TEST(GatePower, SyncBudgetRejectsMoreLaunchesThanBaseline) {
  auto m = more_launches_than_baseline("defect-nan-predicate");
  EXPECT_FALSE(m.empty()) << "the sync budget accepted an arm that launches more operators than the baseline";
  if (!m.empty() && world_rank() == 0) std::printf("rejected as expected:%s\n", first_lines(m, 2).c_str());
}

// Gate power of the rule for arms golden/ does not record: held to a budget in total, one hidden read per
// iteration still breaks it (syncfree's budget: the arm is syncfree plus the read), and so do a NaN check's extra
// launches (the predicate bank launches more than syncfree's budget allows in all).
TEST(GatePower, SyncBudgetInTotalRejectsExtraReadAndExtraLaunches) {
  auto reads = over_budget("defect-extra-read", "syncfree", BudgetRule::kTotal);
  auto launches = over_launch_budget("defect-nan-predicate", "syncfree", BudgetRule::kTotal);
  // As on a GPU runner, whose LibTorch made no golden budget: the budget arm's launches measured in this launch.
  auto measured = over_launch_budget("defect-nan-predicate", "syncfree", BudgetRule::kTotal, "(another LibTorch)");
  EXPECT_FALSE(measured.empty()) << "the in-total launch budget measured in the launch accepted an arm that launches "
                                    "more per iteration";
  EXPECT_FALSE(reads.empty()) << "the in-total budget accepted an arm with a hidden extra read per iteration";
  EXPECT_FALSE(launches.empty()) << "the in-total launch budget accepted an arm that launches more per iteration";
  if (!reads.empty() && !launches.empty() && world_rank() == 0)
    std::printf("rejected as expected:%s%s\n", first_lines(reads, 1).c_str(), first_lines(launches, 1).c_str());
}

// zerosync: no host read at all between log points (iteration 1 aside: the timers' first report); at a log point
// the one batched read.
TEST(SyncBudget, ZerosyncReadsNothingBetweenLogPoints) {
  std::vector<std::string> bad;
  for (const SyncScenario& s : sync_scenarios(gate_fixture())) {
    for (const IterationRecord& r : sync_run(s, "zerosync").trace.records) {
      if (r.iteration == 1) continue;
      const bool log = r.iteration % s.log_interval == 0;
      for (const auto& [site, n] : r.reads_per_site)
        if (n > 0 && !(log && site == "batched_log_read" && n == 1))
          bad.push_back(fmt::format("{} iteration {} ({}) rank {}: {} read(s) at {}", s.key, r.iteration,
                                    log ? "log" : "non-log", r.rank, n, site));
    }
  }
  EXPECT_TRUE(bad.empty()) << bad.size() << " reads outside the log points' one read" << first_lines(bad);
}

// Gate power: an operator that sizes its output from the device (a boolean-mask index) in a deferred site is a
// host read on CUDA; on CPU the operator counter's sync rule counts it at its site, so syncfree's budget breaks
// although no ledger call and no spelling the source scan knows is there.
TEST(GatePower, SyncBudgetRejectsADataDependentShapeOperator) {
  if (heavy_fixture()) GTEST_SKIP() << "dp64: the same counting is shown to reject on the smaller fixtures";
  auto m = over_budget("defect-data-dependent-read", "syncfree");
  EXPECT_FALSE(m.empty()) << "the sync budget accepted a boolean-mask index in a deferred NaN check";
  if (!m.empty() && world_rank() == 0) std::printf("rejected as expected:%s\n", first_lines(m, 2).c_str());
}

// Gate power: one hidden read per iteration must break syncfree's budget.
TEST(GatePower, SyncBudgetRejectsHiddenExtraRead) {
  auto m = over_budget("defect-extra-read", "syncfree");
  EXPECT_FALSE(m.empty()) << "the sync budget accepted an arm with a hidden extra read per iteration";
  if (!m.empty() && world_rank() == 0) std::printf("rejected as expected:%s\n", first_lines(m, 2).c_str());
}

}  // namespace
}  // namespace loopgate
