// Groups that write down every collective and transfer they carry (collective_call.h), per iteration, for the
// Trace: RunConfig::record_collectives (`loopgate run --record-collectives`). The record is host bookkeeping only
// (names, dtypes, counts the host already knows): no device read, no kernel. A collective a CUDA graph replays
// is not issued by the host and is not recorded.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "trainer/parallel/collective_call.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

// Every call of a run's recorded groups, keyed by current_iteration() (setup is -1). Thread-safe: on a GPU the
// backward pass (and its tensor-parallel collectives) runs on autograd's device thread.
// While it lives, an abort (the progress watchdog's) prints this rank's last call and whether the rank is still
// inside it, one line, "loopgate collectives: rank R: waiting in CALL" or "in no collective; the last: CALL", so
// that `loopgate gate` names the collective where the ranks parted instead of a timeout.
class CollectiveLog {
 public:
  CollectiveLog();
  ~CollectiveLog();
  CollectiveLog(const CollectiveLog&) = delete;
  CollectiveLog& operator=(const CollectiveLog&) = delete;

  void add(int64_t iteration, CollectiveCall call);     // before the call is issued: the rank is inside it
  void done();                                          // after it returned
  // The call threw (the transport refused it: a truncation, a closed peer): prints "loopgate collectives: rank R:
  // failed in CALL: WHY" at once, and where() says so from then on.
  void failed(const std::string& why);
  std::vector<CollectiveCall> take(int64_t iteration);  // and forget them
  std::string where() const;                            // the abort's line (without the prefix)
  // The last kRecent calls issued, oldest first: what the early hang verdict compares across ranks, as a flight
  // recorder's ring would be (empty when the record is busy).
  static constexpr size_t kRecent = 32;
  std::vector<CollectiveCall> recent() const;

 private:
  mutable std::mutex mu_;
  std::map<int64_t, std::vector<CollectiveCall>> calls_;
  CollectiveCall last_;
  std::vector<CollectiveCall> ring_;  // the last kRecent calls, ring_[next_ % kRecent] the oldest once full
  size_t next_ = 0;
  int64_t last_iteration_ = -1;
  bool any_ = false, inside_ = false;
  std::string failed_;  // why the last call threw, "" when it did not
  int hook_ = -1;
};

// From the ranks' abort lines (rank -> where(): "waiting in CALL ...", "failed in CALL ...", "in no collective; the
// last: CALL ..."): the call two ranks issued as the same collective (group, operation, sequence number) with a
// different element count or dtype, named with each rank's size, e.g. "size mismatch in tp#0 all_reduce.sum #57:
// rank 0 Float[10], rank 1 Float[12]"; "" when there is none.
std::string mismatched_call(const std::map<int, std::string>& where);

// Where the newest live record says this rank stands (CollectiveLog::where); when none lives, where the last record
// that failed in a call stood then (until a new record is made); else "". The watchdog's early hang verdict
// (fixtures/harness/watchdog.h) compares it across ranks. Any thread.
std::string live_collective_where();
// The same record's recent() calls; empty when there is none.
std::vector<CollectiveCall> live_collective_recent();

// From every rank's recent calls: the first collective two ranks issued as the same call (group, operation,
// sequence number) with another element count or dtype, as mismatched_call names it; "" when there is none.
std::string mismatched_recent_calls(const std::map<int, std::vector<CollectiveCall>>& recent);

// From every rank's place once each has made no progress for the stall time (where() lines, or "outside the run's
// collectives (last site: S)" for a rank with no record): "rank 0 waiting in CALL; rank 1 ..." when some rank waits
// in a recorded call and the ranks do not all stand at one place, the proof that no call can complete; "" when
// no rank waits in a recorded call, every rank stands at the same call (a slow transport, not a parting), or a
// record was busy. The 60-s progress watchdog stays the backstop for those.
std::string parted_ranks(const std::map<int, std::string>& where);

// `inner` recorded into `log` as group `kind` ("tp", "dp", ...).
CommPtr recorded_comm(CommPtr inner, const std::string& kind, std::shared_ptr<CollectiveLog> log);
ProcessGroups recorded_groups(const ProcessGroups& groups, const std::shared_ptr<CollectiveLog>& log);
// A group's name in records: its kind and its lowest world rank ("tp#2").
std::string group_label(const Comm& group, const std::string& kind);
// The group names recorded_groups gives this rank's groups ("world#0", "tp#2", ...): a Trace lists them so that a
// check knows the members of each group even where a rank issued nothing on it.
std::vector<std::string> recorded_group_names(const ProcessGroups& groups);

}  // namespace loopgate
