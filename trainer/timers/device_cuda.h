// The CUDA side of the instruments (LOOPGATE_HAS_CUDA builds only): device events for the sync-free timers
// (seed commit 4: cudaEventRecord on the current stream, lagged but lossless reports) and the device
// synchronize behind the baseline's HostTimer. Not here: what is timed (the loop) or the CPU event source
// (timers.h ClockEventSource).
#pragma once
#include <memory>

#include "trainer/timers/timers.h"

namespace loopgate {

// Events recorded on LibTorch's current CUDA stream of the current device, with timing enabled.
// query() is cudaEventQuery (never blocks); synchronize() is cudaEventSynchronize (a real sync, counted in
// blocking_waits() when the event had not completed yet).
std::unique_ptr<EventSource> make_cuda_event_source();

// cudaDeviceSynchronize (Megatron's torch.cuda.synchronize() in Timer.start/stop).
void cuda_device_synchronize();

}  // namespace loopgate
