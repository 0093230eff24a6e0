// `loopgate run`'s GPU flags and the CUPTI table beside the ledger's (tools/loopgate/gpu.h).
#include "tools/loopgate/gpu.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "fixtures/run_features.h"
#include "trainer/common/error.h"
#include "trainer/measure/ledger.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/measure/cupti_counter.h"
#include "trainer/timers/device_cuda.h"
#include <cuda_runtime.h>
#endif

namespace loopgate {

int visible_gpu_count() {
#if LOOPGATE_HAS_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;  // no driver or no device: none visible
  return n;
#else
  throw InputError("--device cuda: this loopgate was built without the GPU tier (configure with the gpu preset)");
#endif
}

// On a GPU, one rank per GPU: the fixtures whose ranks fit, each one left out named with why. None fitting is
// bad input (the runner cannot run the gate it was asked for).
std::vector<Fixture> fixtures_that_fit(const std::vector<Fixture>& fixtures, int gpus, const char* command) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  LG_INPUT_CHECK(gpus > 0, "--device cuda: no GPU visible (CUDA_VISIBLE_DEVICES={})", visible ? visible : "<unset>");
  // None fits: one line, before any left-out line.
  LG_INPUT_CHECK(std::any_of(fixtures.begin(), fixtures.end(), [&](const Fixture& f) { return f.world <= gpus; }),
                 "--device cuda: no fixture asked for fits the {} visible GPU(s)", gpus);
  std::vector<Fixture> fit;
  for (const Fixture& f : fixtures) {
    if (f.world <= gpus) {
      fit.push_back(f);
    } else {
      std::printf("loopgate %s: %s left out: it needs %d GPUs (one per rank), this runner has %d\n", command,
                  f.name.c_str(), f.world, gpus);
    }
  }
  return fit;
}

GpuFlags& gpu_flags() {
  static GpuFlags flags;
  return flags;
}

void add_gpu_flags(CLI::App* run, GpuFlags& f) {
  run->add_option("--device", f.device, "cpu | cuda (cuda: NCCL, one GPU per rank, bf16 params)");
  run->add_option("--params-dtype", f.params_dtype, "fp32 | bf16 (default: fp32 on cpu, bf16 on cuda)");
  run->add_flag("--cupti", f.cupti, "count real host syncs with CUPTI and print them beside the ledger's");
  run->add_flag("--profile", f.profile,
                "CUPTI activity records: per iteration device busy, idle, launch-starved (idle waiting for the "
                "host's launch) and sync-starved ms (the part after a host sync, until the host leads again), table "
                "and steady-state median (--device cuda; docs/profile.md)");
  run->add_option("--capture-probe", f.capture_probe,
                  "REGION[@ITER]: capture forward_backward, optimizer or training_log of iteration ITER (default 2) into a CUDA "
                  "graph in global capture mode; prints whether it captured or which read broke it");
  run->add_option("--cuda-graph", f.cuda_graph,
                  "iteration: capture one iteration of an arm that reads nothing between log points (zerosync) as a "
                  "CUDA graph and replay it at every later one, a log point's one read after its replay (--device cuda)")
      ->group(kRunFeatures);
  run->add_option("--async-emulation", f.async_emulation,
                  "SEED >= 0: the CPU as a device that runs behind: an asynchronous read's copy lands at its wait "
                  "(or, seeded, at once) and its buffer holds NaN until then; timer events lag up to three log "
                  "windows (--device cpu; docs/checks.md races)")
      ->group(kRunFeatures);
  run->add_option("--stress", f.stress,
                  "SEED >= 0: before each asynchronous read's copy its pinned buffer is poisoned and the stream spins "
                  "a seeded, rank-asymmetric one to four ms, so the host runs far ahead (--device cuda; "
                  "docs/checks.md races)");
}

void apply_gpu_flags(const GpuFlags& f, RunConfig& c) {
  LG_INPUT_CHECK(f.device == "cpu" || f.device == "cuda", "--device '{}': must be cpu or cuda", f.device);
  c.model.device = f.device == "cuda" ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
  std::string dtype = f.params_dtype.empty() ? (f.device == "cuda" ? "bf16" : "fp32") : f.params_dtype;
  LG_INPUT_CHECK(dtype == "fp32" || dtype == "bf16", "--params-dtype '{}': must be fp32 or bf16", dtype);
  c.model.dtype = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  LG_INPUT_CHECK(!f.cupti || f.device == "cuda", "--cupti needs --device cuda");
  LG_INPUT_CHECK(!f.profile || f.device == "cuda", "--profile needs --device cuda (CUPTI activity records)");
  if (!f.cuda_graph.empty()) {
    LG_INPUT_CHECK(f.cuda_graph == "iteration", "--cuda-graph '{}': must be iteration", f.cuda_graph);
    // The dynamic scaler replaces its scale tensors each update instead of writing them in place, which a captured
    // graph cannot follow (it would replay the first scale forever). Checked before the device, so CPU CI sees it.
    LG_INPUT_CHECK(!c.dynamic_loss_scale, "--cuda-graph {} with --dynamic-loss-scale: the scaler's update is not "
                   "graph-safe", f.cuda_graph);
    LG_INPUT_CHECK(f.device == "cuda", "--cuda-graph {}: needs --device cuda (CUDA graphs)", f.cuda_graph);
    LG_INPUT_CHECK(f.capture_probe.empty(), "--cuda-graph {} and --capture-probe {}: one at a time", f.cuda_graph,
                   f.capture_probe);
    c.cuda_graph_iteration = true;
  }
  if (f.async_emulation) {
    LG_INPUT_CHECK(*f.async_emulation >= 0, "--async-emulation {}: the seed must be >= 0", *f.async_emulation);
    LG_INPUT_CHECK(f.device == "cpu", "--async-emulation {}: emulates on CPU what a GPU does for real (--device cpu)",
                   *f.async_emulation);
    c.async_emulation = {true, static_cast<uint64_t>(*f.async_emulation)};
  }
  if (f.stress) {
    LG_INPUT_CHECK(*f.stress >= 0, "--stress {}: the seed must be >= 0", *f.stress);
    LG_INPUT_CHECK(f.device == "cuda", "--stress {}: needs --device cuda (on CPU: --async-emulation)", *f.stress);
    c.stress = {true, static_cast<uint64_t>(*f.stress)};
  }
  if (!f.capture_probe.empty()) {
    LG_INPUT_CHECK(f.device == "cuda", "--capture-probe {}: needs --device cuda (CUDA graphs)", f.capture_probe);
    try {
      c.capture = parse_capture_spec(f.capture_probe);
    } catch (const InputError& e) {
      throw InputError(std::string("--capture-probe: ") + e.what());
    }
  }
}

void cupti_start_if_asked(int rank) {
  if (!gpu_flags().cupti) return;
#if LOOPGATE_HAS_CUDA
  CuptiSyncCounter& c = CuptiSyncCounter::instance();
  set_current_iteration(-1);  // setup: the ledger's first begin_iteration(0) is Megatron's iteration 1
  if (!c.start() && rank == 0) std::printf("loopgate: --cupti: CUPTI sync counter unavailable: %s\n", c.why().c_str());
#else
  if (rank == 0) std::printf("loopgate: --cupti: this loopgate was built without the GPU tier\n");
#endif
}

void cupti_stop() {
#if LOOPGATE_HAS_CUDA
  if (gpu_flags().cupti) CuptiSyncCounter::instance().set_paused(true);
#endif
}

void cupti_print(const Trace& t, int rank) {
#if LOOPGATE_HAS_CUDA
  CuptiSyncCounter& c = CuptiSyncCounter::instance();
  if (!gpu_flags().cupti || !c.active()) return;
  std::vector<int64_t> its;
  for (int64_t it : t.iterations()) its.push_back(it);
  const SyncTable table = by_megatron_iteration(c.table());
  std::printf("%s", format_sync_table(table, "CUPTI host syncs (cu*Synchronize + sync memcpys) per site per iteration, "
                                             "rank " + std::to_string(rank) + " (setup = iteration 0, not shown)",
                                      its).c_str());
  // ledger == CUPTI, per site over the shown iterations (diagnostic checksums are outside the ledger's count)
  std::map<std::string, int64_t> ledger, cupti;
  for (int64_t it : its) {
    if (const IterationRecord* r = t.find(it, rank))
      for (const auto& [site, n] : r->reads_per_site) ledger[site] += n;
    auto row = table.find(it);
    if (row != table.end())
      for (const auto& [site, tally] : row->second) cupti[site] += tally.syncs();
  }
  int64_t mismatches = 0;
  for (Site s : all_sites()) {
    const std::string name = site_name(s);
    if (ledger[name] != cupti[name]) {
      ++mismatches;
      std::printf("  ledger != CUPTI at %s: ledger %lld, CUPTI %lld\n", name.c_str(),
                  static_cast<long long>(ledger[name]), static_cast<long long>(cupti[name]));
    }
  }
  std::printf("ledger vs CUPTI over %zu iteration(s): %s\n", its.size(),
              mismatches == 0 ? "every ledger site agrees" : "MISMATCH (see above)");
  std::printf("%s", format_driver_calls(c.driver_calls(), 10).c_str());
#else
  (void)t;
  (void)rank;
#endif
}

// ---- --profile ----

bool profile_start_if_asked(int rank) {
  if (!gpu_flags().profile) return false;
#if LOOPGATE_HAS_CUDA
  CuptiSyncCounter& c = CuptiSyncCounter::instance();
  set_current_iteration(-1);  // setup is no iteration's window
  if (c.start() && c.start_profile()) return true;
  if (rank == 0) std::printf("loopgate: --profile: CUPTI profile unavailable: %s\n", c.why().c_str());
#else
  if (rank == 0) std::printf("loopgate: --profile: this loopgate was built without the GPU tier\n");
#endif
  return false;
}

void profile_end_window() {
#if LOOPGATE_HAS_CUDA
  if (gpu_flags().profile) CuptiSyncCounter::instance().end_profile_window();
#endif
}

void profile_stop() {
#if LOOPGATE_HAS_CUDA
  if (!gpu_flags().profile) return;
  CuptiSyncCounter& c = CuptiSyncCounter::instance();
  c.end_profile_window();  // before the drain below, which is no iteration's
  if (c.profiling()) cuda_device_synchronize();  // every record complete: the stop's forced flush keeps them all
  c.stop_profile();
#endif
}

ProfileReport profile_report() {
  ProfileReport r;
#if LOOPGATE_HAS_CUDA
  CuptiSyncCounter& c = CuptiSyncCounter::instance();
  if (!gpu_flags().profile || !c.active()) return r;
  const DeviceProfile p = by_megatron_iteration(c.profile());
  r.available = !p.windows.empty() || !p.intervals.empty();
  r.rows = analyze_starvation(p);
  r.dropped_records = p.dropped_records;
  r.intervals = static_cast<int64_t>(p.intervals.size());
  r.launch_times = p.launch_times;
#endif
  return r;
}

void profile_print(int rank) {
  if (!gpu_flags().profile) return;
  const ProfileReport r = profile_report();
  if (!r.available) return;
  std::printf("%s", format_starvation_table(r.rows, "device profile per iteration, rank " + std::to_string(rank) +
                                                        " (CUPTI activity: kernels, copies, memsets; ms)").c_str());
  const std::vector<StarvationRow> steady = steady_rows(r.rows);
  std::printf("%s", format_starvation_summary(summarize_starvation(steady),
                                              "steady state (the first and the last iteration left out)").c_str());
  std::printf("sync-starved: device idle from a host sync's return (or its enter, when the device drained later) "
              "while the device waits for each next launch, until work the host issued ahead; other idle: the rest "
              "(docs/profile.md). Launch times joined for %lld of %lld device intervals\n",
              static_cast<long long>(r.launch_times), static_cast<long long>(r.intervals));
  if (r.dropped_records > 0)
    std::printf("WARNING: CUPTI dropped %lld activity record(s): busy time is a lower bound\n",
                static_cast<long long>(r.dropped_records));
}

}  // namespace loopgate
