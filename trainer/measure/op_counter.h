// Launches per iteration on CPU: a count of the operators LibTorch dispatches, per (iteration, site),
// through LibTorch's RecordFunction callbacks — the CPU stand-in for CUPTI's cuLaunchKernel count on a GPU.
// Counted: the lowest operators that would run a kernel — none dispatched inside them does (an at::where whose
// only child is the at::empty of its result counts; a composite whose children launch does not); not counted:
// views, metadata and allocation (empty, view, select, detach, ...), host reads (the ledger suspends counting while it
// converts a read on the host; on a GPU a read is a copy, not a kernel launch). Attribution is CUPTI's:
// (current_iteration(), current_site()) on the dispatching thread, so a site that adds work shows by name.
// A proxy, not a kernel count: a fused GPU kernel can be several CPU operators and the reverse; the gate's rule
// (a candidate arm launches no more than the baseline) holds on both counts (docs/performance.md compares them).
// It also predicts the GPU's implicit host syncs on CPU: an operator that on CUDA makes the host wait for the device
// (an output size or a value read back: nonzero under boolean-mask indexing, unique, masked_select, item's
// _local_scalar_dense, equal, is_nonzero; op_synchronizes) counts one sync at its site, once per outermost such
// operator, unless the ledger dispatched it (Suspend). The loop adds them to the site's host reads, so the CPU
// sync budget rejects a hidden read whatever its spelling, as CUPTI does on a GPU.
// Off unless enabled, and then its callback is not registered: it costs a few hundred ns per operator.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "trainer/common/uncounted_operators.h"

namespace loopgate {

using OpTable = std::map<int64_t, std::map<std::string, int64_t>>;  // ledger iteration -> site -> operators

class OpCounter {
 public:
  static OpCounter& instance();
  void set_enabled(bool on);  // registers the callback the first time
  bool enabled() const;
  void reset();
  OpTable table() const;
  std::map<std::string, int64_t> counts(int64_t iteration) const;  // one iteration's per-site counts
  // One iteration's operators that would synchronize on CUDA, per site (outside the ledger's reads).
  std::map<std::string, int64_t> syncs(int64_t iteration) const;

  // While one lives on this thread, nothing is counted (the ledger's host-side conversion of a read).
  using Suspend = UncountedOperators;

  // For the callback.
  void add(int64_t iteration, const char* site);
  void add_sync(int64_t iteration, const char* site);

 private:
  OpCounter() = default;
};

// Whether an operator name (e.g. "aten::view") would launch no kernel: views, metadata, allocation, no-op casts.
bool op_launches_nothing(const char* name);
// Whether an operator (e.g. "aten::nonzero") makes the host wait for the device on CUDA: its output's size or a
// value must come back to the host before it returns.
bool op_synchronizes(const char* name);

}  // namespace loopgate
