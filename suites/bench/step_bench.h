// Step time per arm over the miniature Megatron's training loop, one Google Benchmark per (configuration, arm).
// One benchmark iteration is one window of --log-interval training iterations (so every window holds exactly
// one log point, where the sync-free arms do their reads), run on one TrainSession (the machinery
// `loopgate ab --arms` uses); the reported time is the window's time divided by its iterations: time per training
// iteration. Time source: CUDA events on the current stream on GPU, the host clock on CPU; the max over MPI ranks
// (the slowest rank sets the step). Counters, per training iteration: syncs/iter (the host-read ledger over the
// timed windows), launches/iter (one more, untimed window: CUPTI kernel launches + copies on GPU when CUPTI can
// subscribe, else the CPU operator counter), idle_pct only when an IdleSource is installed (idle_source.h).
#pragma once
#include <vector>

#include "suites/bench/bench_options.h"

namespace loopgate::bench {

// Registers step/<fixture>/<config>/<arm> for every case and arm. Collective (builds each case's process
// groups): every rank calls it with the same cases, in the same order. Sets the run device.
void register_step_benchmarks(const std::vector<BenchCase>& cases, const BenchFlags& flags, int rank);

}  // namespace loopgate::bench
