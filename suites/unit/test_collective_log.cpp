// Unit tests for the collective record's abort line (trainer/parallel/recorded_comm.h, CollectiveLog::where): the
// rank is "waiting in" the call it issued until the call returns, then "in no collective" with that call as the
// last; nothing issued yet says so; a call that threw is "failed in" it; two ranks' sizes of one collective that
// differ are named (mismatched_call); ranks that part after a stall are named, ranks at one call are not
// (parted_ranks); the watchdog reads the newest live record or the last failed one (live_collective_where), and
// its ring of recent calls names a mismatch that is no rank's last call (mismatched_recent_calls). `loopgate gate`
// names a hang from these lines (gate_launch.cpp).
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

TEST(CollectiveLog, AThrowingCallIsNamedAsFailed) {
  CollectiveLog log;
  log.add(0, vote());
  log.failed("MPI call failed (rc 15): MPI_ERR_TRUNCATE\nmore");
  EXPECT_EQ(log.where(), wrong() ? "" : "failed in mp#0 all_reduce.sum Float[1] #4 @numerics (iteration 1): MPI call "
                                        "failed (rc 15): MPI_ERR_TRUNCATE");
  log.add(0, vote());  // the next call clears it
  EXPECT_EQ(log.where().rfind("waiting in ", 0), wrong() ? 1u : 0u);
}

// The ranks' abort lines as the gate reads them: the same collective (group, operation, sequence) with another
// element count or dtype on one rank is named with each rank's size.
TEST(CollectiveLog, NamesTheCollectiveWhoseSizeDiffersBetweenRanks) {
  const std::string a = "waiting in tp#0 all_reduce.sum Float[10] #57 @numerics (iteration 3)";
  const std::string b = "failed in tp#0 all_reduce.sum Float[12] #57 @numerics (iteration 3): MPI call failed (rc 15)";
  EXPECT_EQ(mismatched_call({{0, a}, {1, b}}),
            wrong() ? "" : "size mismatch in tp#0 all_reduce.sum #57: rank 0 Float[10], rank 1 Float[12]");
  const std::string half = "in no collective; the last: tp#0 all_reduce.sum Half[10] #57 @numerics (iteration 3)";
  EXPECT_EQ(mismatched_call({{0, a}, {1, half}}),
            wrong() ? "" : "size mismatch in tp#0 all_reduce.sum #57: rank 0 Float[10], rank 1 Half[10]");
  // Not a mismatch: the same call, another sequence number (a rank behind), or no call at all.
  EXPECT_EQ(mismatched_call({{0, a}, {1, a}}), wrong() ? "x" : "");
  EXPECT_EQ(mismatched_call({{0, a}, {1, "waiting in tp#0 all_reduce.sum Float[12] #58 @numerics (iteration 3)"}}),
            wrong() ? "x" : "");
  EXPECT_EQ(mismatched_call({{0, a}, {1, "in no collective; none issued yet"}}), wrong() ? "x" : "");
}

// The early hang verdict's judge: every rank stalled, some rank inside a recorded call, not all at one place.
TEST(CollectiveLog, RanksThatPartAreNamedAndRanksAtOneCallAreNot) {
  const std::string vote_ = "waiting in mp#0 all_reduce.sum Float[1] #4 @numerics (iteration 2)";
  const std::string away = "outside the run's collectives (last site: trace_gather)";
  EXPECT_EQ(parted_ranks({{0, vote_}, {1, away}}),
            wrong() ? "" : "rank 0 " + vote_ + "; rank 1 " + away);
  const std::string later = "waiting in tp#0 all_reduce.sum Float[4096] #314 @numerics (iteration 3)";
  EXPECT_EQ(parted_ranks({{0, vote_}, {1, later}}), wrong() ? "" : "rank 0 " + vote_ + "; rank 1 " + later);
  const std::string stuck = "in no collective; the last: mp#0 all_reduce.sum Float[1] #4 @params_norm (iteration 2)";
  EXPECT_EQ(parted_ranks({{0, later}, {1, stuck}}), wrong() ? "" : "rank 0 " + later + "; rank 1 " + stuck);
  // Left to the backstop: every rank at the same call (a slow transport), no rank inside a recorded call (slow
  // host work after a run), a record that was busy, a place missing.
  EXPECT_EQ(parted_ranks({{0, vote_}, {1, vote_}}), wrong() ? "x" : "");
  EXPECT_EQ(parted_ranks({{0, away}, {1, stuck}}), wrong() ? "x" : "");
  EXPECT_EQ(parted_ranks({{0, vote_}, {1, "the record is busy"}}), wrong() ? "x" : "");
  EXPECT_EQ(parted_ranks({{0, vote_}, {1, ""}}), wrong() ? "x" : "");
  EXPECT_EQ(parted_ranks({}), wrong() ? "x" : "");
}

// The watchdog reads the newest live record; with none alive, the last record that failed in a call as it stood
// then (a throw unwinds the record before the job is aborted), until a new record is made; else "".
TEST(CollectiveLog, TheLiveRecordIsTheNewestAndAFailedOneOutlivesItsRun) {
  { CollectiveLog clears_any_earlier_failure; }
  EXPECT_EQ(live_collective_where(), wrong() ? "x" : "");
  {
    CollectiveLog outer;
    outer.add(0, vote());
    {
      CollectiveLog inner;
      EXPECT_EQ(live_collective_where(), wrong() ? "" : "in no collective; none issued yet");
    }
    EXPECT_EQ(live_collective_where(), wrong() ? "" : "waiting in mp#0 all_reduce.sum Float[1] #4 @numerics (iteration 1)");
    outer.failed("MPI call failed (rc 15)");
  }
  EXPECT_EQ(live_collective_where(),
            wrong() ? "" : "failed in mp#0 all_reduce.sum Float[1] #4 @numerics (iteration 1): MPI call failed (rc 15)");
  ASSERT_EQ(live_collective_recent().size(), wrong() ? 0u : 1u);
  EXPECT_EQ(live_collective_recent()[0].count, 1);
  { CollectiveLog next; }
  EXPECT_EQ(live_collective_where(), wrong() ? "x" : "");
}

// The recent calls are the last kRecent, oldest first; two ranks' rings name the call whose size differs even
// where it is no rank's last call.
TEST(CollectiveLog, TheRingKeepsTheLastCallsAndNamesAMismatchInThem) {
  CollectiveLog log;
  for (int64_t i = 0; i < static_cast<int64_t>(CollectiveLog::kRecent) + 5; ++i) {
    CollectiveCall c = vote();
    c.seq = i;
    log.add(0, c);
    log.done();
  }
  const std::vector<CollectiveCall> r = log.recent();
  ASSERT_EQ(r.size(), wrong() ? 0u : CollectiveLog::kRecent);
  EXPECT_EQ(r.front().seq, wrong() ? 0 : 5);
  EXPECT_EQ(r.back().seq, wrong() ? 0 : static_cast<int64_t>(CollectiveLog::kRecent) + 4);
  std::vector<CollectiveCall> other = r;
  other[3].count = 2;  // the fourth oldest, not the last
  EXPECT_EQ(mismatched_recent_calls({{0, r}, {1, other}}),
            wrong() ? "" : "size mismatch in mp#0 all_reduce.sum #8: rank 0 Float[1], rank 1 Float[2]");
  EXPECT_EQ(mismatched_recent_calls({{0, r}, {1, r}}), wrong() ? "x" : "");
}

}  // namespace
}  // namespace loopgate
