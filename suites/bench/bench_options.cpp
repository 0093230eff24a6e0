// suites/bench's flags (bench_options.h).
#include "suites/bench/bench_options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tools/loopgate/gpu.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/error.h"
#include "trainer/loop/arms.h"

namespace loopgate::bench {

void add_bench_flags(CLI::App* app, BenchFlags& f) {
  add_run_flags(app, f.run);
  add_gpu_flags(app, gpu_flags());
  // The bench sets these itself (train_iters from the windows; arms from --arms) or has no use for them (a Trace,
  // the sync table, faults): refused as unknown rather than silently ignored.
  for (const char* name : {"--iters", "--arm", "--trace", "--syncs", "--inject", "--quiet", "--cupti", "--capture-probe"})
    app->remove_option(app->get_option(name));
  app->get_option("--log-interval")
      ->description("log every K iterations, >= 1 (default 10 here); one window = one log interval, so each timed "
                    "window holds one log point");
  app->add_option("--arms", f.arms, "arms to benchmark, comma-separated (default baseline,syncfree,onesync,zerosync)")
      ->delimiter(',');
  app->add_option("--configs", f.configs,
                  "model shapes, comma-separated: launch-bound (the fixture's model; default) | balanced | "
                  "compute-bound (sizes per --device: docs/bench.md)")
      ->delimiter(',');
  app->add_option("--windows", f.windows, "timed windows per benchmark, >= 1 (default 5); a window is --log-interval "
                                          "iterations");
  app->add_option("--warmup-windows", f.warmup_windows, "untimed windows before them, >= 0 (default 1)");
}

const std::vector<ShapePreset>& shape_presets(bool cuda) {
  // CPU: a few ms per iteration on one core, so a smoke stays short. H200 (bf16): launch-bound is ~2k kernels of
  // microseconds each; balanced puts a few ms of matmuls beside them; compute-bound ~0.4 B parameters and tens of
  // ms of matmuls per iteration, where a host sync costs little.
  static const std::vector<ShapePreset> cpu{
      {"launch-bound"}, {"balanced", 128, 2, 64, 4}, {"compute-bound", 256, 2, 64, 8}};
  static const std::vector<ShapePreset> gpu{
      {"launch-bound"}, {"balanced", 1024, 4, 512, 16}, {"compute-bound", 2048, 8, 1024, 16}};
  return cuda ? gpu : cpu;
}

const ShapePreset& find_shape_preset(const std::string& name, bool cuda) {
  for (const ShapePreset& p : shape_presets(cuda))
    if (p.name == name) return p;
  throw InputError(fmt::format("--configs: unknown configuration '{}' (known: launch-bound, balanced, compute-bound)",
                               name));
}

BenchCase make_bench_case(const BenchFlags& f, const std::string& config) {
  const ShapePreset& preset = find_shape_preset(config, gpu_flags().device == "cuda");
  RunFlags run = f.run;
  auto preset_unless_given = [](std::optional<int64_t>& flag, int64_t value) {
    if (!flag && value > 0) flag = value;
  };
  preset_unless_given(run.hidden, preset.hidden);
  preset_unless_given(run.layers, preset.layers);
  preset_unless_given(run.seq, preset.seq);
  preset_unless_given(run.heads, preset.heads);
  if (!run.log_interval) run.log_interval = f.default_log_interval;
  // warm-up, timed and one counted window (launches, idle), each a whole log interval
  run.iters = (f.warmup_windows + f.windows + 1) * *run.log_interval;
  run.quiet = true;
  BenchCase c;
  c.config = config;
  c.run = to_run_options(run);
  c.run.config.param_checksums = false;  // timing runs measure the loop, not the Trace's diagnostics
  c.run.config.count_launches = false;   // the counted window turns the operator counter on itself
  c.window = *run.log_interval;
  return c;
}

std::vector<BenchCase> validate_bench_flags(const BenchFlags& f, int world) {
  LG_INPUT_CHECK(f.windows >= 1, "--windows {}: must be >= 1", f.windows);
  LG_INPUT_CHECK(f.warmup_windows >= 0, "--warmup-windows {}: must be >= 0", f.warmup_windows);
  LG_INPUT_CHECK(!f.arms.empty(), "--arms: needs at least one arm");
  LG_INPUT_CHECK(!f.configs.empty(), "--configs: needs at least one configuration");
  for (const std::string& arm : f.arms) {
    try {
      find_arm(arm);
    } catch (const InputError& e) {
      throw InputError(std::string("--arms: ") + e.what());
    }
  }
  std::vector<BenchCase> cases;
  for (const std::string& config : f.configs) {
    cases.push_back(make_bench_case(f, config));
    validate_run_options(cases.back().run, world);
  }
  return cases;
}

std::string shape_label(const RunConfig& c) {
  return fmt::format("h{} L{} s{} a{} mb{} gb{}", c.model.hidden, c.model.layers, c.model.seq, c.model.heads,
                     c.data.micro_batch, c.data.global_batch);
}

}  // namespace loopgate::bench
