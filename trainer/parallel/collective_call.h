// One collective or point-to-point transfer as a rank issued it: the record `loopgate run --record-collectives`
// keeps per rank and iteration (recorded_comm.h) and the `collectives` check compares (docs/checks.md). Written
// in Traces as one line each, for example
//   "tp#0 all_reduce.sum Float[2048] #12 @numerics"     a collective: group, op, dtype[count], number, scope
//   "pp#0 send Float[512] ->2 #3 @numerics"             a transfer: ->peer (send) or <-peer (recv), world ranks
// A group is named by its kind and its lowest world rank (the groups of one kind partition the world). The number
// counts the group's collectives from the run's start; a transfer's counts the transfers to (or from) that peer.
#pragma once
#include <cstdint>
#include <string>

namespace loopgate {

struct CollectiveCall {
  std::string group;  // "tp#0"
  std::string op;     // all_reduce.sum|max|min, all_gather, reduce_scatter.sum|max|min, broadcast, barrier, send, recv
  std::string dtype;  // c10's name: Float, Long, ... ("" for a barrier)
  int64_t count = 0;  // elements
  int peer = -1;      // send / recv: the peer's world rank; broadcast: the root's; else -1
  int64_t seq = 0;
  std::string scope;  // current_scope() when issued: "numerics", a sync site, "setup"

  bool transfer() const { return op == "send" || op == "recv"; }
  bool operator==(const CollectiveCall& o) const {
    return group == o.group && op == o.op && dtype == o.dtype && count == o.count && peer == o.peer &&
           seq == o.seq && scope == o.scope;
  }
  bool operator!=(const CollectiveCall& o) const { return !(*this == o); }
};

std::string to_string(const CollectiveCall& c);
// Inverse of to_string; a malformed line -> InputError quoting it.
CollectiveCall parse_collective_call(const std::string& line);

}  // namespace loopgate
