// The flags of `loopgate run` as the user gave them (std::optional: unset = the fixture's default), their
// CLI11 definitions, the range check of each flag on its own, and the conversion into a RunConfig.
// Checks that need the world size or several flags together (layout, model shape, batch, LR relations,
// --inject against the run) are in validate.h; both run before any work.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace loopgate {

struct RunOptions;

struct RunFlags {
  std::string fixture = "single", arm = "baseline";
  std::optional<std::string> inject, trace, decay, rerun_mode, on_fault, reduce_order;
  std::optional<int64_t> iters, log_interval, warmup, decay_iters, wsd_decay_iters, tp, pp, mbs, gbs;
  std::optional<int64_t> seq, hidden, layers, heads, bucket, seed, data_seed, permute_seed;
  std::optional<double> exit_mins, sim_minutes, lr, min_lr, clip, wd, loss_scale;
  bool sp = false, no_sp = false, syncs = false, quiet = false, dynamic_scale = false;
};

void add_run_flags(CLI::App* run, RunFlags& flags);

// Each flag on its own: counts >= 1 (or >= 0 where 0 means something), reals finite and in range, names
// known, no contradictory pair (--sequence-parallel with --no-sequence-parallel, ...). InputError naming the
// flag and its value.
void check_run_flags(const RunFlags& flags);

// check_run_flags, then the fixture's config with the given flags applied (InputError as above).
RunOptions to_run_options(const RunFlags& flags);

// "'text'" for messages: values with spaces or separators stay readable.
std::string quoted(const std::string& text);

}  // namespace loopgate
