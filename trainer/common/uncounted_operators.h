// Operators that are not the loop's: while one of these lives on a thread, the operator counter
// (trainer/measure/op_counter.h) counts nothing dispatched there. The ledger's host-side conversion of a read and the
// copy engine's work (no kernel on a device) use it as OpCounter::Suspend; a CPU transport uses it for its own adds
// (ShmComm's, MpiComm's ordered sums: MPI adds inside its own code and NCCL in its kernels), so launch counts do not
// depend on the backend or the reduction order.
#pragma once

namespace loopgate {

class UncountedOperators {
 public:
  UncountedOperators();
  ~UncountedOperators();
  UncountedOperators(const UncountedOperators&) = delete;
  UncountedOperators& operator=(const UncountedOperators&) = delete;
};

bool operators_uncounted();  // on this thread

}  // namespace loopgate
