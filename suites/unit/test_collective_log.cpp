// Unit tests for the collective record's abort line (trainer/parallel/recorded_comm.h, CollectiveLog::where): the
// rank is "waiting in" the call it issued until the call returns, then "in no collective" with that call as the
// last; nothing issued yet says so. `loopgate gate` names a hang from these lines (gate_launch.cpp).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 expects the wrong state, so every test here fails.
#include <gtest/gtest.h>

#include "suites/unit/wrong.h"
#include "trainer/parallel/recorded_comm.h"

namespace loopgate {
namespace {

CollectiveCall vote() {
  CollectiveCall c;
  c.group = "mp#0";
  c.op = "all_reduce.sum";
  c.dtype = "Float";
  c.count = 1;
  c.seq = 4;
  c.scope = "numerics";
  return c;
}

TEST(CollectiveLog, SaysWhetherTheRankIsInsideItsLastCall) {
  CollectiveLog log;
  EXPECT_EQ(log.where(), wrong() ? "" : "in no collective; none issued yet");
  log.add(1, vote());  // iteration index 1: the second iteration
  EXPECT_EQ(log.where(), wrong() ? "" : "waiting in mp#0 all_reduce.sum Float[1] #4 @numerics (iteration 2)");
  log.done();
  EXPECT_EQ(log.where(), wrong() ? "" : "in no collective; the last: mp#0 all_reduce.sum Float[1] #4 @numerics (iteration 2)");
  EXPECT_EQ(log.take(1).size(), wrong() ? 0u : 1u) << "the record keeps the call for the Trace";
}

}  // namespace
}  // namespace loopgate
