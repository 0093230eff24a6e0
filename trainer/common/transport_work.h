// Host work a CPU transport does on the ranks' behalf (ShmComm adding their values, as MPI does inside its own code
// and NCCL inside its kernels): the operator counter (trainer/measure/op_counter.h) leaves the LibTorch operators
// dispatched inside one uncounted, so a run's launch counts do not depend on the CPU backend.
#pragma once

namespace loopgate {

class TransportWork {
 public:
  TransportWork();
  ~TransportWork();
  TransportWork(const TransportWork&) = delete;
  TransportWork& operator=(const TransportWork&) = delete;
};

bool in_transport_work();  // on this thread

}  // namespace loopgate
