// The flags of `loopgate run` as the user gave them (std::optional: unset = the fixture's default): a plain
// struct, so the subcommands' options (commands.h) hold it without depending on run_flags.h's functions.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace loopgate {

struct RunFlags {
  std::string fixture = "single", arm = "baseline";
  std::optional<std::string> inject, trace, syncs_json, decay, rerun_mode, on_fault, reduce_order, cpu_comm, save,
      load;
  std::optional<int64_t> iters, log_interval, warmup, decay_iters, wsd_decay_iters, tp, pp, mbs, gbs;
  std::optional<int64_t> seq, hidden, layers, heads, bucket, seed, data_seed, permute_seed, save_interval,
      exit_interval;
  std::optional<double> exit_mins, sim_minutes, lr, min_lr, clip, wd, loss_scale;
  bool sp = false, no_sp = false, syncs = false, quiet = false, dynamic_scale = false, check_collectives = false,
       record_collectives = false, digests = false;
};

}  // namespace loopgate
