// Mutation's defaults (mutation.h); the one for the protocol is in select_protocol.cpp, beside the choice it hands
// through.
#include "trainer/loop/mutation.h"

#include "trainer/loop/arms.h"
#include "trainer/loop/rerun.h"

namespace loopgate {

std::unique_ptr<Timer> Mutation::event_timer(const std::string& name, EventSource* events) const {
  return std::make_unique<EventTimer>(name, events, EventTimer::kMaxPendingEvents);
}

void Mutation::bank_nan(RerunStateMachine& rerun, const at::Tensor& value) const { rerun.bank_value(value); }

const Mutation& no_mutation() {
  static const Mutation none;
  return none;
}

const Mutation& Arm::mutated() const { return mutation ? *mutation : no_mutation(); }

}  // namespace loopgate
