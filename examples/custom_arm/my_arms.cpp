// examples/custom_arm: a framework engineer's own arms and fixture, registered with the installed loopgate.
// This file is linked into the gate executable itself (my_gates, beside loopgate::gate_suites): its static
// registrars run before main, so GoogleTest instantiates every gate for these arms when `--lg_arms=my-syncfree`
// names them, and `--lg_fixture=tiny2` runs on the fixture. Not here: any gate or harness code (installed).
#include <memory>
#include <string>

#include "fixtures/defects/mutations.h"
#include "fixtures/fixtures.h"
#include "trainer/loop/arms.h"
#include "trainer/loop/mutation.h"

namespace {

using loopgate::Arm;
using loopgate::RunConfig;
using loopgate::SyncMode;

// The seed's five commits (Megatron-LM PR #7076) under our own name, one policy per sync site.
Arm my_syncfree() {
  Arm a;
  a.name = "my-syncfree";
  a.description = "our sync-free loop: the seed's five commits";
  a.nan_check = SyncMode::kDeferred;       // NaN/Inf verdicts banked on device, merged into the rerun all-reduce
  a.stat_bundle = SyncMode::kDeferred;     // grad norm, num zeros, params norm, loss scale: one batched read
  a.device_scalars = SyncMode::kDeferred;  // no pageable H2D copies; the LR rides the batched read
  a.timers = SyncMode::kDeferred;          // device-event timers, reported one window late
  a.exit_vote = SyncMode::kDeferred;       // the exit-duration vote rides the batched read
  return a;
}

// A plausible mistake, handed into the loop as a mutation (trainer/loop/mutation.h): deferred timers that report
// whatever has completed at the log point. On a device that runs behind the host a log line then carries no
// interval-time window (0.0 s) or two at once. The timers gate rejects it (TimersLagged: its lagging-device
// scenario); every other gate accepts it.
struct WhateverCompletedTimers : loopgate::Mutation {
  void wrap(const loopgate::Made& made) const override {  // every product the loop builds passes here
    if (const auto* t = std::get_if<loopgate::made::EventTimer>(&made))
      t->timer = loopgate::event_timer_reporting(std::make_unique<loopgate::WhateverCompletedReport>(), t->name,
                                                 t->events);
  }
};

Arm my_broken() {
  Arm a = my_syncfree();
  a.name = "my-broken";
  a.description = "deferred timers report whatever has completed (wrong)";
  a.mutation = std::make_shared<WhateverCompletedTimers>();
  return a;
}

// TP=2 with sequence parallel, as tp2sp, with a smaller model: 2 layers of hidden 32.
RunConfig tiny2() {
  RunConfig c = loopgate::fixture_config("tp2sp");
  c.model.hidden = 32;
  c.model.layers = 2;
  return c;
}

}  // namespace

LOOPGATE_REGISTER_ARM(my_syncfree());
LOOPGATE_REGISTER_ARM(my_broken());
LOOPGATE_REGISTER_FIXTURE(loopgate::Fixture{"tiny2", 2, "TP=2 (sequence parallel), hidden 32, 2 layers"}, tiny2);
