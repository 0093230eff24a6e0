// The Trace gather's codec (trace_gather.h).
#include "suites/bench/trace_gather.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/loop/trace.h"

namespace loopgate::bench {
namespace {

constexpr int kRanks = 64;       // dp64's world
constexpr int kIterations = 3;   // a clean run of the gate on dp64

// One rank's Trace, as a dp64 clean run records it (values of that shape, not of a run).
Trace rank_trace(int rank) {
  Trace t;
  t.arm = "baseline";
  t.fixture = "dp64";
  t.world = kRanks;
  t.environment = {{"ATEN_CPU_CAPABILITY", "avx2"}, {"blas", "openblas-pthread/libblas.so.3 core Haswell"}};
  for (int it = 1; it <= kIterations; ++it) {
    IterationRecord r;
    r.iteration = it;
    r.rank = rank;
    r.lm_loss = 5.5550637245178223 + it * 1e-7;
    r.params_norm = 18.818593606644235;
    r.grad_norm = 0.57536852359771729;
    r.learning_rate = 9.9999997473787516e-05;
    r.loss_scale = 1.0;
    r.consumed_samples = 64 * it;
    for (const char* name : {"forward-backward", "interval-time", "optimizer"})
      r.timer_intervals.push_back({name, it - 1, 0.54302621300303144 / it});
    r.timer_window_first = r.timer_window_last = it;
    for (const char* site : {"grad_norm", "learning_rate", "loss_accum_seed", "loss_report", "loss_scale",
                             "nan_check_grad", "nan_check_loss", "num_zeros", "params_norm", "rerun_decision",
                             "timers", "update_successful"})
      r.reads_per_site[site] = 2;
    r.launches_per_site = {{"numerics", 540}, {"nan_check_grad", 42}, {"timers", 3}};
    r.schedule = "F0 B0";
    r.param_checksum_before = 0x3eb3b99c290a57c5ULL + static_cast<uint64_t>(it);
    r.param_checksum_after = 0x709b024c27adb309ULL + static_cast<uint64_t>(it);
    r.collective_groups = {"world#0", "tp#1", "dp#0", "pp#1", "mp#1"};
    for (int i = 0; i < 22; ++i)
      r.collectives.push_back({i < 14 ? "dp#0" : "mp#1", "all_reduce.sum", "Float", 16576 + i, -1, 16 + i, "numerics"});
    t.records.push_back(std::move(r));
  }
  return t;
}

void encode(benchmark::State& state) {
  const Trace t = rank_trace(1);
  for (auto _ : state) benchmark::DoNotOptimize(trace_to_wire(t));
  state.counters["bytes"] = static_cast<double>(trace_to_wire(t).size());
}

// Every rank's bytes into one Trace, as each rank of the gather does.
void decode_all(benchmark::State& state) {
  std::vector<std::vector<uint8_t>> wire;
  for (int r = 0; r < kRanks; ++r) wire.push_back(trace_to_wire(rank_trace(r)));
  for (auto _ : state) {
    Trace all;
    for (const auto& w : wire) {
      Trace t = trace_from_wire(w.data(), w.size());
      all.records.insert(all.records.end(), std::make_move_iterator(t.records.begin()),
                         std::make_move_iterator(t.records.end()));
    }
    benchmark::DoNotOptimize(all);
  }
  state.counters["ranks"] = kRanks;
}

}  // namespace

void register_trace_gather_benchmarks() {
  benchmark::RegisterBenchmark("trace_gather/encode_one_rank", encode)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("trace_gather/decode_64_ranks", decode_all)->Unit(benchmark::kMillisecond);
}

}  // namespace loopgate::bench
