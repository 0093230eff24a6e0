// What the CUPTI sync counter counts, as plain C++ (no CUDA headers): a tally per (iteration, site), per driver
// function, and their text tables. Shared by the counter's two forms: in-process (cupti_counter.h) and the CUPTI
// engine both forms drive (cupti_core.h, also in the injection library). Implemented in cupti_core.cpp (GPU tier).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loopgate {

// What happened at one (iteration, site).
struct SyncTally {
  int64_t synchronizes = 0;    // cuCtxSynchronize / cuStreamSynchronize / cuEventSynchronize (+ _v2, _ptsz)
  int64_t sync_memcpys = 0;    // cuMemcpy{DtoH,HtoD,,2D,3D,AtoH,HtoA}[_v2][_ptds]: return only when done
  int64_t pageable_async = 0;  // cuMemcpy*Async with a pageable host side: blocks, emits no synchronize
  int64_t stalls = 0;          // any other driver call that blocked >= the slow-call threshold
  int64_t driver_calls = 0;    // every driver call attributed here
  int64_t kernel_launches = 0; // cuLaunchKernel[Ex] / cuLaunchCooperativeKernel / cuLaunch* (+ _ptsz): one kernel each
  int64_t graph_launches = 0;  // cuGraphLaunch (+ _ptsz): a whole CUDA graph in one call
  int64_t copies = 0;          // cuMemcpy* / cuMemset* calls of any kind: stream work that is not a kernel
  double blocked_ms = 0.0;     // host time inside every driver call (enter -> exit)
  double sync_ms = 0.0;        // of which inside the synchronizes, sync memcpys and pageable copies
  double max_call_ms = 0.0;
  std::string slowest_call;    // driver function of max_call_ms

  int64_t syncs() const { return synchronizes + sync_memcpys; }  // what the ledger's reads should equal
  void add(const SyncTally& o);
};

using SyncTable = std::map<int64_t, std::map<std::string, SyncTally>>;  // iteration -> site -> tally

// The counter keys by the ledger's iteration, which is Megatron's minus one (the loop's begin_iteration comes
// before Megatron's increment; setup is -1). Re-keyed by Megatron's iteration, as Traces are.
inline SyncTable by_megatron_iteration(const SyncTable& t) {
  SyncTable out;
  for (const auto& [iteration, sites] : t) out[iteration + 1] = sites;
  return out;
}

// One driver function's totals over the whole counted region (diagnostics: which calls blocked).
struct DriverCallTally {
  std::string function;
  std::string counted_as;  // "synchronize", "sync-memcpy", "pageable-async", "other"
  int64_t calls = 0;
  double total_ms = 0.0, max_ms = 0.0;
};

// The per-site per-iteration table (rows: sites; columns: iterations, up to max_columns; then total, per-iter,
// pageable, stalls, blocked ms). `iterations` fixes the columns (empty: every iteration in the table).
std::string format_sync_table(const SyncTable& table, const std::string& title,
                              const std::vector<int64_t>& iterations = {}, size_t max_columns = 12);
std::string format_driver_calls(const std::vector<DriverCallTally>& calls, size_t max_rows = 12);

}  // namespace loopgate
