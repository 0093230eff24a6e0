// What loopgate's own bookkeeping costs the host per training iteration (instrumentation overhead), as
// microbenchmarks precise to nanoseconds where `loopgate ab --arms A,A:bare` on a noisy machine resolves only
// percent: bookkeeping/ledger_iteration/{counting,off} is one iteration's ledger work at the baseline's read count
// (begin_iteration, one note per read, the Trace's per-site counts); bookkeeping/level1_timers is one iteration's
// level-1 timer events (two timers, start and stop, on the run device's event source: CUDA events on a GPU), a log
// point's report every 20 iterations included. The reads' device work is not here: it is the loop's, in both modes.
#pragma once

namespace loopgate::bench {

// `reads_per_iteration`: notes per iteration (the baseline's host reads per iteration on the fixture; 56 on single).
void register_bookkeeping_benchmarks(int reads_per_iteration);

}  // namespace loopgate::bench
