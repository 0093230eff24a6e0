// Gate: loop_code. What the loop's code must hold before any run proves it: every host read goes through the
// Ledger — the source scan of every folder of trainer/, against every spelling of a device-to-host read, pageable
// host-to-device copy and device wait that LibTorch and CUDA offer, with an explicit allowlist (file + reason) —
// and the event timers keep the specification's properties on a FakeClock (each interval once, in order, exact
// sums, open windows drained, one lagged window per report, at most the specification's 1024 events pending:
// the literal kSpecBound below, never EventTimer::kMaxPendingEvents, which a change could raise with the code).
// The same scenarios as the unit tests (fixtures/loop_checks.h). Run on rank 0 of every launch: they need no ranks, and
// `loopgate gate --fixture F` must still run them; the harness all-reduces the verdict.
// Not proven here: reads the scan cannot see (docs/gates.md lists them; CUPTI counts them on GPU runners).
#include <gtest/gtest.h>
#include <fmt/format.h>

#include "fixtures/compare.h"
#include "fixtures/defects/mutations.h"
#include "fixtures/loop_checks.h"
#include "fixtures/scenarios.h"

namespace loopgate {
namespace {

// Seed PR #7076: "bounded at 1024 pending events". The gate's own literal.
constexpr size_t kSpecBound = 1024;
static_assert(kSpecBound == kSpecMaxPendingEvents, "the unit tests and this gate hold the same specification");

std::vector<std::string> timer_problems(const EventTimerFactory& make) {
  std::vector<std::string> p;
  for (const TimerCheck& c : {check_event_timer_bound(make, kSpecBound),
                              check_event_timer_thousand_intervals(make, kSpecBound),
                              check_event_timer_drain(make), check_event_timer_lagging_device(make)})
    p.insert(p.end(), c.problems.begin(), c.problems.end());
  return p;
}

TEST(LoopCode, EveryHostReadInTrainerGoesThroughTheLedger) {
  if (world_rank() != 0) return;  // one scan per launch; the verdict is all-reduced
  const TrainerScan scan = scan_trainer_for_host_reads(trainer_source_dir());
  const auto p = scan_problems(scan);
  EXPECT_TRUE(p.empty()) << "direct device reads outside the Ledger in " << trainer_source_dir() << ": " << problem_list(p, 12);
  std::printf("source scan of %s: %s\n", trainer_source_dir().c_str(), scan_summary(scan).c_str());
}

TEST(LoopCode, EventTimersKeepTheirPropertiesOnAFakeClock) {
  if (world_rank() != 0) return;
  const auto p = timer_problems(code_event_timer());
  EXPECT_TRUE(p.empty()) << "EventTimer as the loop builds it: " << problem_list(p, 12);
}

// ---- gate power ----

TEST(GatePower, LoopCodeScanFindsEveryPlantedRead) {
  if (world_rank() != 0) return;
  std::string summary;
  const auto p = planted_scan_problems(trainer_source_dir(), &summary);
  EXPECT_TRUE(p.empty()) << "the source scan missed planted reads: " << problem_list(p, 12);
  if (p.empty()) std::printf("rejected as expected: %s\n", summary.c_str());
}

TEST(GatePower, LoopCodeRejectsAPendingBoundAboveTheSpecifications) {
  if (world_rank() != 0) return;
  // What raising EventTimer::kMaxPendingEvents would build: the code's constant moves, the specification's not.
  const EventTimerFactory raised = [](const std::string& name, EventSource* events) {
    return std::make_unique<EventTimer>(name, events, /*max_pending=*/2048);
  };
  const auto p = timer_problems(raised);
  bool above = false;
  for (const std::string& s : p) above = above || s.find("above the specification's bound of 1024") != std::string::npos;
  EXPECT_TRUE(above) << "the loop_code gate accepted an EventTimer bound of 2048: " << problem_list(p, 12);
  if (above) std::printf("rejected as expected: %s\n", problem_list(p, 2).c_str());
}

TEST(GatePower, LoopCodeRejectsWhateverCompletedReports) {
  if (world_rank() != 0) return;
  const EventTimerFactory whatever = [](const std::string& name, EventSource* events) {
    return event_timer_reporting(std::make_unique<WhateverCompletedReport>(), name, events);
  };
  const auto p = check_event_timer_lagging_device(whatever).problems;
  EXPECT_FALSE(p.empty()) << "the loop_code gate accepted timers that report whatever has completed";
  if (!p.empty()) std::printf("rejected as expected: %s\n", problem_list(p, 2).c_str());
}

}  // namespace
}  // namespace loopgate
