// Checkpoints with Megatron's layout: DIR/iter_0000010/rank_00001.pt, one file per rank, and the tracker
// DIR/latest_checkpointed_iteration.txt, written last. Each file is written under a temporary name, synced, then
// renamed, and carries a format version and a checksum of its tensors. What a checkpoint holds does not depend on
// the loop protocol, so any arm's checkpoint loads into any arm.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/capture/capture.h"
#include "trainer/loop/config.h"
#include "trainer/loop/log_window.h"
#include "trainer/model/param.h"

namespace loopgate {

class Adam;
class GradScaler;
class Ledger;
class Mutation;
class OptimizerParamScheduler;

inline constexpr int64_t kCheckpointFormat = 1;

struct Checkpoint {
  int64_t iteration = 0;         // the iterations done (Megatron's `iteration`)
  int64_t consumed_samples = 0;
  int64_t scheduler_steps = 0;   // OptimizerParamScheduler::num_steps: samples of the successful steps
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // host tensors, in the order saved
  std::vector<std::pair<std::string, int64_t>> args;  // the model and layout it was saved with (checkpoint_args)
  SavedWindow window;  // the log window at the save (empty at a log point): two tensors of the file, loopgate.window.*
};

// What a checkpoint must agree on with the run that loads it, by flag name (Megatron's check_checkpoint_args):
// the model's shape and the parallel layout.
std::vector<std::pair<std::string, int64_t>> checkpoint_args(const RunConfig& c, int world);
// InputError, naming the flag and both values, where `c` was saved with other args than `run` has.
void check_checkpoint_args(const std::string& dir, const Checkpoint& c, const RunConfig& run, int world);

// Whether the run saves (--save-interval, with --save) and whether it ends (--exit-interval) after 1-based iteration
// `done`: Megatron's checkpoint_and_decide_exit's intervals.
bool saves_at(const RunConfig& c, int64_t done);
bool exits_at(const RunConfig& c, int64_t done);
// Megatron's checkpoint_and_decide_exit on its intervals, after training_log: `save` at each --save-interval; at
// each --exit-interval the run ends, saved first (unless it just was). True when the run ends here.
bool checkpoint_and_decide_exit(const RunConfig& c, int64_t done, const std::function<void()>& save);

// Saves fall after iteration 1, at any iteration: between log points the save holds the log window so far (any
// family's, SavedWindow), so the next line after a load is the line the run would have printed. InputError, naming the
// flag, for a --save-interval or --exit-interval (with --save) of 1.
void check_save_intervals(const RunConfig& c);

// The live tensors a checkpoint holds besides the scheduler and the position: the parameters, Adam's main
// parameters, moments and step count, the loss scaler (`scaler` null: none). Nothing else carries over: the model
// has no dropout and the data is a function of the iteration.
GraphState checkpoint_state(const Params& params, const Adam& adam, const GradScaler* scaler);
// Writes `c`'s tensors into `live` in place (a graph captured later reads these addresses). InputError, naming
// `dir`, when one is missing or of another shape or dtype.
void restore_checkpoint_state(const std::string& dir, const Checkpoint& c, const GraphState& live);

// DIR/iter_NNNNNNN.
std::string checkpoint_iteration_dir(const std::string& dir, int64_t iteration);
// Writes this rank's file of `c`. Collective over the world (a host-only vote): once every rank's file is in
// place rank 0 writes the tracker. InputError when a file cannot be written.
void save_checkpoint(const std::string& dir, int rank, int world, const Checkpoint& c);
// The tracker's iteration, then this rank's file of it. InputError, naming the file, when one is missing or
// unreadable, of another format, rank or world size, or its tensors do not match its checksum.
Checkpoint load_checkpoint(const std::string& dir, int rank, int world);

// What a checkpoint holds of a run, as a view of its live state: Megatron's model, optimizer and opt_param_scheduler,
// and the position in the data.
struct TrainState {
  const Params& params;
  Adam& adam;
  GradScaler* scaler;  // null: none
  OptimizerParamScheduler& scheduler;
  int64_t& consumed_samples;
  int64_t& iteration;  // the iterations done
};

// Megatron's save_checkpoint into --save: the state read to the host, handed through `m` (Mutation::saving), then
// this rank's file and, once every rank's is in place, the tracker. Collective over the world.
void save_train_state(const RunConfig& cfg, int rank, int world, const TrainState& s, const SavedWindow& window,
                      Ledger& ledger, const Mutation& m);
// Megatron's load_checkpoint from --load: the file read and checked, handed through `m` (Mutation::loaded), then
// written into `s` in place and the scheduler stepped by its saved steps, as its load_state_dict does. InputError,
// naming the file or the flag, for a checkpoint this run cannot continue. Returns the log window it continues.
SavedWindow load_train_state(const RunConfig& cfg, int rank, int world, const TrainState& s, const Mutation& m);

}  // namespace loopgate
