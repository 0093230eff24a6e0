// suites/bench's flags: `loopgate run`'s own (fixture, model shape, device: tools/loopgate/run_flags.h, gpu.h), plus
// which arms and which shape configurations to benchmark and how many windows to time. Google Benchmark's
// --benchmark_* flags are parsed first and removed (benchmark::Initialize); these parse what is left.
// Not here: running anything (step_bench.h, host_forms.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/loopgate/commands.h"
#include "tools/loopgate/run_flags.h"

namespace CLI {
class App;
}

namespace loopgate::bench {

struct BenchFlags {
  RunFlags run;  // loopgate run's flags; --iters, --arm, --trace, --syncs and --inject are the bench's own business
  std::vector<std::string> arms{"baseline", "syncfree", "onesync", "zerosync"};
  std::vector<std::string> configs{"launch-bound"};
  int64_t windows = 5;         // timed windows per benchmark: Google Benchmark's iteration count, fixed
  int64_t warmup_windows = 1;  // untimed, before the timed ones (Google Benchmark's warm-up is time-based)
  int64_t default_log_interval = 10;  // when --log-interval is not given: one window = one log interval
};

void add_bench_flags(CLI::App* app, BenchFlags& flags);

// A model shape on top of the fixture: launch-bound is the fixture's own tiny model; balanced and compute-bound
// grow hidden size, layers and sequence length (sizes per device: the CPU ones stay tiny). A shape flag the user
// gave (--hidden-size, --num-layers, --seq-length, --num-attention-heads) wins over the preset's.
struct ShapePreset {
  std::string name;
  int64_t hidden = 0, layers = 0, seq = 0, heads = 0;  // 0: the fixture's
};
const std::vector<ShapePreset>& shape_presets(bool cuda);
const ShapePreset& find_shape_preset(const std::string& name, bool cuda);  // InputError naming the known ones

// One configuration as it will run: the RunOptions of `loopgate run` for the fixture, shape and device, with
// train_iters covering warm-up, timed and counted windows. Every InputError names the flag.
struct BenchCase {
  std::string config;  // preset name
  RunOptions run;
  int64_t window = 0;  // training iterations per Google Benchmark iteration (= the log interval)
};
BenchCase make_bench_case(const BenchFlags& flags, const std::string& config);

// Every check of the flags on their own and against the job (validate_run_options per configuration): the same
// verdict on every rank, before any collective.
std::vector<BenchCase> validate_bench_flags(const BenchFlags& flags, int world);

// "h64 L4 s32 a4 mb2 gb8": the model and batch of a run, for the benchmark's label.
std::string shape_label(const RunConfig& config);

}  // namespace loopgate::bench
