// Arms: a loop variant is data — one SyncMode per host-sync site and a protocol family — not a branch in the loop.
// `baseline` reads every site eagerly (Megatron HEAD); `syncfree-1` … `syncfree-5` apply the seed's five commits
// cumulatively (Megatron-LM PR #7076; `syncfree` = `syncfree-5`); `onesync` goes beyond the seed: the rerun
// verdict, update_successful and, at log points, the stat bundle and exit vote ride one collective and one read per
// iteration; `zerosync` reads nothing between log points. An arm may carry a Mutation (mutation.h), a loop change
// handed in from outside the trainer: the planted defects of the test side (fixtures/defects/) are such arms.
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace loopgate {

class Mutation;

enum class SyncMode { kEager, kDeferred };

struct Arm {
  std::string name;
  std::string description;
  SyncMode nan_check = SyncMode::kEager;       // commit 1: validate_result verdicts banked on device
  SyncMode stat_bundle = SyncMode::kEager;     // commit 2: grad norm, zeros, params norm, loss scale, losses
  SyncMode device_scalars = SyncMode::kEager;  // commit 3: loss-accumulator seed, LR into the batched read
  SyncMode timers = SyncMode::kEager;          // commit 4: device-event timers, no per-call barrier
  SyncMode exit_vote = SyncMode::kEager;       // commit 5: exit vote rides the batched read
  bool one_read = false;                       // onesync
  // zerosync: the rerun verdict, update_successful, the step count (the LR from a table), the skip / NaN counters
  // and the abort live on the device; the host reads only at log points.
  bool on_device = false;
  // A loop change handed in from outside the trainer; null: none (Megatron's loop).
  std::shared_ptr<const Mutation> mutation;
  const Mutation& mutated() const;  // *mutation, or no_mutation()
};

// What an arm declares about its collectives against baseline's; the `collectives` check lets nothing else differ
// (docs/checks.md). Derived from the modes, so a new arm declares its differences by its modes.
struct CollectiveChanges {
  // Scopes (sync sites, by site_name) whose collectives may differ: the sites whose mode the arm changes, and the
  // read it folds them into.
  std::set<std::string> scopes;
  // The step is masked on the device rather than skipped by the host (onesync, zerosync): on an iteration the
  // baseline skipped, the arm also issues the step's numerics collectives.
  bool masked_step = false;
};
CollectiveChanges changed_collectives(const Arm& arm);

// Every registered arm: baseline, syncfree-1..5, syncfree, onesync, zerosync, then the arms added with register_arm
// in the order they were added (the test side's planted defects among them).
const std::vector<Arm>& all_arms();
// InputError naming the unknown arm and listing the known ones.
const Arm& find_arm(const std::string& name);
// The candidates a gate compares with baseline by default: syncfree-1..5, syncfree, onesync, zerosync.
std::vector<std::string> default_candidates();

// ---- arms from outside the trainer (docs/custom-arms.md) ----

// Adds `arm` to all_arms() / find_arm(), so `--lg_arms=NAME` (the gate suites), `loopgate run --arm NAME` and
// `loopgate gate --arm NAME` take it. InputError when the name is empty, holds anything but letters, digits and '-', or is taken.
// Call it before anything runs: the gate suites read the arms when GoogleTest registers its tests (in
// InitGoogleTest), so register from a static initializer (LOOPGATE_REGISTER_ARM) in a source file linked into
// the executable itself — not a static library, whose unreferenced objects the linker drops.
void register_arm(Arm arm);

// The static initializer behind LOOPGATE_REGISTER_ARM: registers, and on bad input prints one line
// (`loopgate: error: ...`) and exits with code 2 before main.
struct ArmRegistrar {
  explicit ArmRegistrar(Arm arm);
};

}  // namespace loopgate

#define LOOPGATE_CONCAT_INNER_(a, b) a##b
#define LOOPGATE_CONCAT_(a, b) LOOPGATE_CONCAT_INNER_(a, b)
// LOOPGATE_REGISTER_ARM(expr): registers the Arm `expr` evaluates to, at static-initialization time
// (variadic: an expression with commas outside parentheses stays one argument).
#define LOOPGATE_REGISTER_ARM(...) \
  static const ::loopgate::ArmRegistrar LOOPGATE_CONCAT_(loopgate_arm_registrar_, __COUNTER__) { __VA_ARGS__ }
