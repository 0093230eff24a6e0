// Unit tests for recorded collectives: the one-line form of a call (and its errors), the Trace's JSON round trip,
// and both questions of the collectives check on hand-made Traces — a skipped collective, a send without its
// receive, a reordered pair, a declared scope, a masked step.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fixtures/collective_checks.h"
#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/loop/trace.h"

namespace loopgate {
namespace {

CollectiveCall call(const std::string& line) { return parse_collective_call(line); }

// Two ranks of one TP group, iteration 1: the same three collectives, unless a test changes them.
Trace two_ranks(const std::string& arm = "baseline") {
  Trace t;
  t.arm = arm;
  t.world = 2;
  for (int r = 0; r < 2; ++r) {
    IterationRecord rec;
    rec.iteration = 1;
    rec.rank = r;
    rec.collective_groups = {"world#0", "tp#0"};
    rec.collectives = {call("tp#0 all_reduce.sum Float[64] #0 @numerics"),
                       call("world#0 all_reduce.sum Float[1] #0 @rerun_decision"),
                       call("tp#0 all_gather Float[32] #1 @numerics")};
    t.records.push_back(rec);
  }
  return t;
}

TEST(CollectiveCall, LineRoundTrip) {
  for (const std::string& line : {"tp#0 all_reduce.sum Float[2048] #12 @numerics", "pp#0 send Float[512] ->1 #3 @numerics",
                                  "pp#0 recv Float[512] <-0 #3 @numerics", "world#0 barrier [0] #6 @timers",
                                  "dp#0 broadcast Long[4] root 2 #0 @setup"})
    EXPECT_EQ(to_string(call(line)), wrong() ? line + " " : line);
  const CollectiveCall c = call("pp#2 send Half[7] ->3 #9 @numerics");
  EXPECT_EQ(c.group, "pp#2");
  EXPECT_EQ(c.op, "send");
  EXPECT_EQ(c.dtype, "Half");
  EXPECT_EQ(c.count, 7 + wrong());
  EXPECT_EQ(c.peer, 3);
  EXPECT_EQ(c.seq, 9);
  EXPECT_EQ(c.scope, "numerics");
}

TEST(CollectiveCall, MalformedLinesNamed) {
  for (const std::string& bad : {"tp#0 all_reduce.sum Float[x] #1 @numerics", "tp#0 send Float[4] #1 @numerics",
                                 "tp#0 all_reduce.sum Float[4] ->1 #1 @numerics", "tp#0 recv Float[4] ->1 #1 @numerics",
                                 "tp#0 all_gather Float[4] #1"}) {
    if (wrong()) {
      EXPECT_NO_THROW(call(bad)) << bad;
      continue;
    }
    try {
      call(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(CollectiveCall, TraceJsonRoundTripKeepsEveryCall) {
  const Trace t = two_ranks();
  Trace back = trace_from_string(trace_to_string(t));
  if (wrong()) back.records[1].collectives.pop_back();
  std::string why;
  EXPECT_TRUE(traces_equal(t, back, &why)) << why;
  back.records[0].collectives[0].count = 65;
  EXPECT_EQ(traces_equal(t, back, &why), static_cast<bool>(wrong()));
  EXPECT_NE(why.find("collective 0"), std::string::npos) << why;
}

TEST(GroupSequences, MatchingRanksHaveNoProblem) {
  Trace t = two_ranks();
  if (wrong()) t.records[1].collectives[0].count = 1;
  EXPECT_TRUE(group_sequence_problems(t).empty());
}

TEST(GroupSequences, ASkippedCollectiveIsNamedWithBothCalls) {
  Trace t = two_ranks();
  if (!wrong()) t.records[1].collectives.erase(t.records[1].collectives.begin() + 1);  // rank 1 skips the vote
  const auto p = group_sequence_problems(t);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "iteration 1: group world#0: rank 1 issued nothing where rank 0 issued "
                  "'world#0 all_reduce.sum Float[1] #0 @rerun_decision' (its collective 0 on the group this iteration)");
}

TEST(GroupSequences, ASendWithoutItsReceiveIsNamed) {
  Trace t = two_ranks();
  t.records[0].collectives.push_back(call("pp#0 send Float[8] ->1 #0 @numerics"));
  t.records[1].collectives.push_back(call(wrong() ? "pp#0 recv Float[8] <-0 #0 @numerics" : "pp#0 recv Float[4] <-0 #0 @numerics"));
  const auto p = group_sequence_problems(t);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("rank 0 sent 'pp#0 send Float[8] ->1 #0 @numerics' to rank 1, which received "
                      "'pp#0 recv Float[4] <-0 #0 @numerics'"), std::string::npos) << p[0];
}

TEST(GroupSequences, ATraceWithoutRecordingSaysSo) {
  Trace t = two_ranks();
  if (!wrong())
    for (IterationRecord& r : t.records) r.collective_groups.clear();
  EXPECT_EQ(group_sequence_problems(t).size(), 1u);
}

TEST(SequenceDifferences, DeclaredScopesAreLeftOutTheRestCompared) {
  const Trace base = two_ranks();
  Trace cand = two_ranks("cand");
  for (IterationRecord& r : cand.records) {
    r.collectives[1] = call("world#0 all_reduce.max Double[7] #0 @onesync_read");  // the vote rides one read
    r.collectives[2].seq = 5;                                                     // numbers may shift
  }
  CollectiveChanges declared;
  declared.scopes = {"rerun_decision", "onesync_read"};
  if (wrong()) declared.scopes.clear();
  EXPECT_TRUE(sequence_differences(base, cand, declared).empty());
  declared.scopes = {"onesync_read"};  // the vote's scope not declared: its absence is a difference
  EXPECT_EQ(sequence_differences(base, cand, declared).size(), 2u);
}

TEST(SequenceDifferences, AReorderedPairIsNamed) {
  const Trace base = two_ranks();
  Trace cand = two_ranks("cand");
  if (!wrong()) std::swap(cand.records[0].collectives[0], cand.records[0].collectives[2]);
  const auto p = sequence_differences(base, cand, {});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "iteration 1 rank 0: cand issued 'tp#0 all_gather Float[32] #1 @numerics' where baseline issued "
                  "'tp#0 all_reduce.sum Float[64] #0 @numerics' (call 0 outside its declared scopes)");
}

TEST(SequenceDifferences, AMaskedStepMayAddNumericsCallsOnASkippedIterationOnly) {
  Trace base = two_ranks();
  Trace cand = two_ranks("cand");
  for (IterationRecord& r : cand.records) r.collectives.push_back(call("tp#0 all_reduce.sum Float[1] #2 @numerics"));
  CollectiveChanges declared;
  declared.masked_step = true;
  EXPECT_EQ(sequence_differences(base, cand, declared).size(), 2u);  // not skipped: an extra call is a difference
  for (IterationRecord& r : base.records) r.skipped = !wrong();
  EXPECT_TRUE(sequence_differences(base, cand, declared).empty());
  for (IterationRecord& r : cand.records) r.collectives.push_back(call("world#0 barrier [0] #1 @timers"));
  EXPECT_EQ(sequence_differences(base, cand, declared).size(), 2u);  // an extra outside the numerics path
}

}  // namespace
}  // namespace loopgate
