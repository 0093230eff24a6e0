// The GPU tier's flags of `loopgate run` and its CUPTI report (kept apart from main.cpp / run.cpp, which call
// these hooks): --device cpu|cuda (cuda: NCCL groups, this rank's GPU, bf16 params), --params-dtype, and
// --cupti (the in-process CUPTI sync counter; its per-site per-iteration table printed beside the ledger's),
// --capture-probe (one region of one iteration captured into a CUDA graph; the verdict printed per rank),
// --profile (the counter's profile mode: per iteration device busy, idle and sync-starved time; docs/profile.md).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "fixtures/fixtures.h"
#include "trainer/measure/starvation.h"
#include "trainer/loop/train.h"

namespace CLI {
class App;
}

namespace loopgate {

struct GpuFlags {
  std::string device = "cpu";
  std::string params_dtype;  // fp32 | bf16; default fp32 on cpu, bf16 on cuda
  bool cupti = false;
  bool profile = false;       // CUPTI activity records -> launch starvation per iteration (--device cuda)
  std::string capture_probe;  // REGION[@ITERATION]: CUDA-graph capture probe (trainer/capture/capture.h)
  std::string cuda_graph;     // "iteration": replay the iterations of a zero-read arm as one CUDA graph
  std::optional<int64_t> async_emulation;  // SEED: CPU copies and events land late (trainer/measure/async_copy.h)
  std::optional<int64_t> stress;           // SEED: GPU reads poisoned and delayed behind sleep kernels
};
GpuFlags& gpu_flags();  // the process's parsed flags

void add_gpu_flags(CLI::App* run, GpuFlags& flags);
// The GPUs this process sees (CUDA_VISIBLE_DEVICES applies). InputError where this loopgate has no GPU tier.
int visible_gpu_count();
// On a GPU, one rank per GPU: the fixtures whose ranks fit, each one left out named with why ("loopgate COMMAND: F
// left out: ..."). No GPU, or none fitting, is bad input (the runner cannot run what it was asked for).
std::vector<Fixture> fixtures_that_fit(const std::vector<Fixture>& fixtures, int gpus, const char* command);
void apply_gpu_flags(const GpuFlags& flags, RunConfig& config);  // InputError on bad values

// --cupti: start before the run (a one-line note on rank 0 and no table when CUPTI cannot subscribe),
// stop right after it (before the Trace gather), print on rank 0 beside the ledger's table.
void cupti_start_if_asked(int rank);
void cupti_stop();
void cupti_print(const Trace& trace, int rank);

// --profile: start before the run (true when profiling; otherwise a one-line note on rank 0), end the open
// iteration window where an A/B phase ends, stop after the run. The report is this rank's, rows keyed by
// Megatron's iteration; empty when not profiling.
bool profile_start_if_asked(int rank);
void profile_end_window();
void profile_stop();
struct ProfileReport {
  bool available = false;
  std::vector<StarvationRow> rows;
  int64_t dropped_records = 0;
  int64_t intervals = 0, launch_times = 0;  // device intervals, and those joined to their launch call
};
ProfileReport profile_report();
// The per-iteration table and the steady-state summary (the first and the last iteration left out).
void profile_print(int rank);

}  // namespace loopgate
