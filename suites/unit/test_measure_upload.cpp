// The batch's upload path on CPU (trainer/measure/async_copy.h, Upload): the "device" tensor is memory of its own,
// and under --async-emulation a stage rewritten before the host next waits on the device is a race. A stage the
// race check missed would let a reused staging buffer pass every CPU gate (the planted
// defect-race-batch-staging-reuse). Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every expectation.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "suites/unit/wrong.h"
#include "trainer/measure/async_copy.h"
#include "trainer/measure/ledger.h"

namespace loopgate {
namespace {

std::unique_ptr<Upload> cpu_upload(Ledger& ledger, bool emulated) {
  return make_upload(ledger, c10::Device(c10::kCPU), AsyncEmulation{emulated, 7}, DeviceStress{}, 0);
}

TEST(Upload, TheDeviceTensorIsMemoryOfItsOwn) {
  Ledger ledger;
  for (bool emulated : {false, true}) {
    auto up = cpu_upload(ledger, emulated);
    at::Tensor stage = at::arange(4, at::kLong);
    const at::Tensor on_device = up->copy(stage);
    stage.fill_(9);  // as a stage rewritten after its copy landed
    EXPECT_EQ(on_device.sum().item<int64_t>(), 6 + wrong()) << (emulated ? "emulated" : "plain");
  }
}

TEST(Upload, AStageRewrittenBeforeTheNextWaitIsARace) {
  Ledger ledger;
  auto up = cpu_upload(ledger, true);
  at::Tensor stage = at::zeros({4}, at::kLong);
  (void)up->copy(stage);
  stage.copy_(at::ones({4}, at::kLong));  // the next microbatch, staged before the copy landed
  (void)up->copy(stage);
  ledger.record_sync(Site::kTimers);      // the host waits: both copies have landed; the first saw its stage rewritten
  EXPECT_EQ(ledger.async_races(), 1 + wrong());
}

TEST(Upload, FreshStagesAndRewritesAfterAWaitAreNoRace) {
  Ledger ledger;
  auto up = cpu_upload(ledger, true);
  for (int i = 0; i < 3; ++i) (void)up->copy(at::full({4}, i, at::kLong));  // a new stage each time: what ships
  at::Tensor stage = at::zeros({4}, at::kLong);
  (void)up->copy(stage);
  (void)ledger.read(Site::kGradNorm, at::ones({1}));  // any wait lands them
  stage.fill_(5);
  ledger.set_counting(false);
  ledger.record_sync(Site::kTimers);  // a wait the ledger does not count still lands copies
  EXPECT_EQ(ledger.async_races(), 0 + wrong());
}

TEST(Upload, UnemulatedNothingIsHeld) {
  Ledger ledger;
  auto up = cpu_upload(ledger, false);
  at::Tensor stage = at::zeros({4}, at::kLong);
  (void)up->copy(stage);
  stage.fill_(1);
  ledger.record_sync(Site::kTimers);
  EXPECT_EQ(ledger.async_races(), 0 + wrong());
}

TEST(Upload, TheEmulationLetsGoOfTheLedgerWhenItEnds) {
  Ledger ledger;
  { auto up = cpu_upload(ledger, true); }
  ledger.record_sync(Site::kTimers);  // no observer left to call
  EXPECT_EQ(ledger.async_races(), 0 + wrong());
}

}  // namespace
}  // namespace loopgate
