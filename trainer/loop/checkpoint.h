// Checkpoints with Megatron's layout: DIR/iter_0000010/rank_00001.pt, one file per rank, and the tracker
// DIR/latest_checkpointed_iteration.txt, written last. Each file is written under a temporary name, synced, then
// renamed, and carries a format version and a checksum of its tensors. What a checkpoint holds does not depend on
// the loop protocol, so any arm's checkpoint loads into any arm.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainer/loop/config.h"

namespace loopgate {

inline constexpr int64_t kCheckpointFormat = 1;

struct Checkpoint {
  int64_t iteration = 0;         // the iterations done (Megatron's `iteration`)
  int64_t consumed_samples = 0;
  int64_t scheduler_steps = 0;   // OptimizerParamScheduler::num_steps: samples of the successful steps
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // host tensors, in the order saved
  std::vector<std::pair<std::string, int64_t>> args;  // the model and layout it was saved with (checkpoint_args)
};

// What a checkpoint must agree on with the run that loads it, by flag name (Megatron's check_checkpoint_args):
// the model's shape and the parallel layout.
std::vector<std::pair<std::string, int64_t>> checkpoint_args(const RunConfig& c, int world);
// InputError, naming the flag and both values, where `c` was saved with other args than `run` has.
void check_checkpoint_args(const std::string& dir, const Checkpoint& c, const RunConfig& run, int world);

// DIR/iter_NNNNNNN.
std::string checkpoint_iteration_dir(const std::string& dir, int64_t iteration);
// Writes this rank's file of `c`. Collective over the world (a host-only vote): once every rank's file is in
// place rank 0 writes the tracker. InputError when a file cannot be written.
void save_checkpoint(const std::string& dir, int rank, int world, const Checkpoint& c);
// The tracker's iteration, then this rank's file of it. InputError, naming the file, when one is missing or
// unreadable, of another format, rank or world size, or its tensors do not match its checksum.
Checkpoint load_checkpoint(const std::string& dir, int rank, int world);

}  // namespace loopgate
