// The log window: what Megatron's training_log sums and counts between two log points (its total_loss_dict: the
// advanced iterations' loss sum; the advanced, skipped and NaN iterations), one class for the three protocol
// families, and what a save between log points keeps of it, so that a run loaded from the save prints the line the
// saving run would have printed (checkpoint.h), whichever family saved and whichever loads. ProtocolBase owns one;
// a family keeps only what its device holds (a loss sum on the device, the on-device family's per-step codes).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loopgate {

// A step whose outcome the host learns only at the next log point or save (the on-device family).
struct WindowStep {
  bool skipped = false;
  const char* verdict = nullptr;  // the rerun verdict the vote found there ("abort", "skip_step"); null: none
};

// An abort the host learns at a log point after its fault's iteration (every step since ran masked).
struct LateAbort {
  int64_t fault_iteration = 0;  // 1-based
  int exit_code = 0;
};

// A window's step counts since the last log point.
struct WindowCounts {
  int64_t advanced = 0, skipped = 0, nan = 0;
};

// The window as a save finds it between log points: the checkpoint's loopgate.window.* numbers.
struct SavedWindow {
  bool has_loss = false;  // an advanced iteration's loss is in the sum (on the rank that holds the loss)
  float loss_sum = 0.0f;  // the advanced iterations' fp32 loss sum, as Megatron's total_loss_dict holds it
  WindowCounts counts;
  // An abort the on-device family found in the window, due at its next log point: the fault's 1-based iteration
  // and exit code (0: none). Only that family can carry it to the next log point.
  int64_t abort_at = 0;
  int abort_code = 0;
  // The outcomes of the window's steps that only the save's read taught the host (the on-device family), oldest
  // first: for the saving run's records; not saved.
  std::vector<WindowStep> steps;
};

// The saved window as the checkpoint's numbers, by key (the loss sum as its float's bits), and back (a file without
// them holds an empty window); and its share of the file's checksum (0 for an empty window, so files saved before the
// window existed still load).
std::vector<std::pair<std::string, int64_t>> window_numbers(const SavedWindow& w);
SavedWindow window_of(const std::map<std::string, int64_t>& numbers);
uint64_t window_hash(const SavedWindow& w);

class LogWindow {
 public:
  WindowCounts counts;
  bool has_loss = false;               // an advanced iteration's loss is in the sum (where the family tracks it)
  float host_loss_sum = 0.0f;          // the sum where the host holds it (the one-read family reads each loss)
  std::optional<LateAbort> due_abort;  // found by a save's read (on-device), due at the next log point

  // A segment begins with the window a loaded run continues (empty: a window begins). Only a family that reads
  // nothing between log points (`carries_abort`) can carry a due abort to its next log point: elsewhere InputError.
  void begin(const SavedWindow& saved, bool carries_abort);
  // Whether the log point of 1-based `iteration` ends the window (Megatron HEAD: the first line does not reset).
  static bool ends_at(int64_t iteration) { return iteration != 1; }
  void reset() {
    counts = {};
    has_loss = false;
    host_loss_sum = 0.0f;
  }
  // What a save keeps: the counts and a due abort, with the loss sum wherever the family holds it.
  SavedWindow saved(bool loss, float loss_sum) const;
};

}  // namespace loopgate
