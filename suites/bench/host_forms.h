// The seed's microbenchmark (GPU only): what the host pays for each way of putting a scalar on the device, or of
// copying between host and device, while the device is busy. Before each timed call a long kernel chain (bf16
// matmuls) is enqueued; the time is the host's time inside the call alone (manual time, host clock). A form that
// blocks pays the pending work (~pending_ms, a counter); one that only enqueues pays microseconds.
// host_form/tensor_pageable_h2d is Megatron's torch.tensor([x], device=cuda); full, zeros, fill_ its sync-free
// replacements; copy_{d2h,h2d}_{pageable,pinned}_nonblocking the non_blocking copies, whose host side decides
// whether they block.
#pragma once

namespace loopgate::bench {

// Registers host_form/<form>/<elements> when this build has the GPU tier and a CUDA device is present at run
// time; returns whether it did. No collectives: each rank measures its own device.
bool register_host_form_benchmarks();

}  // namespace loopgate::bench
