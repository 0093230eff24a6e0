// loopgate_bench: Google Benchmark over the training loop, inside an MPI job (docs/bench.md). Every rank runs
// every benchmark (the step benchmarks hold collectives); only rank 0 reports, the others hand Google Benchmark
// a reporter that prints nothing and never see --benchmark_out. Iteration counts are fixed in code, so no rank
// picks its own count from its own clock.
//   mpirun -np 1 loopgate_bench [--benchmark_* ...] [--fixture F] [--configs ...] [--arms ...] [--device cuda]
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fixtures/defects/catalogue.h"
#include "suites/bench/bench_options.h"
#include "suites/bench/bookkeeping.h"
#include "suites/bench/host_forms.h"
#include "suites/bench/step_bench.h"
#include "suites/bench/trace_gather.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/error.h"

namespace {

// Google Benchmark's reporter for ranks other than 0 (docs/design.md "GPU facts": every rank runs, rank 0 reports).
class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
  void Finalize() override {}
};

bool starts_with(const char* arg, const char* prefix) { return std::strncmp(arg, prefix, std::strlen(prefix)) == 0; }

// argv as this rank passes it on: --benchmark_out* only on rank 0 (each rank would open and truncate the file).
std::vector<char*> rank_args(int argc, char** argv, int rank) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i)
    if (rank == 0 || !starts_with(argv[i], "--benchmark_out")) args.push_back(argv[i]);
  args.push_back(nullptr);
  return args;
}

bool wants_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  loopgate::register_planted_defects();  // --arms may name a planted defect
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  loopgate::world_rank_for_errors() = rank;
  at::set_num_threads(1);  // one intra-op thread per rank, as loopgate run
  at::set_num_interop_threads(1);

  using namespace loopgate::bench;
  BenchFlags flags;
  CLI::App app{"loopgate_bench: step time, host syncs and launches per iteration of each arm (docs/bench.md)"};
  add_bench_flags(&app, flags);
  if (wants_help(argc, argv)) {  // before benchmark::Initialize, which would exit without MPI_Finalize
    if (rank == 0) {
      benchmark::PrintDefaultHelp();
      std::printf("\n%s", app.help().c_str());
    }
    MPI_Finalize();
    return 0;
  }

  std::vector<char*> args = rank_args(argc, argv, rank);
  int n = static_cast<int>(args.size()) - 1;
  benchmark::Initialize(&n, args.data());  // takes the --benchmark_* flags out
  std::string problem;
  std::vector<BenchCase> cases;
  try {
    app.parse(n, args.data());
    cases = validate_bench_flags(flags, size);
  } catch (const CLI::ParseError& e) {
    problem = e.what();
  } catch (const loopgate::InputError& e) {
    problem = e.what();
  }
  if (!loopgate::input_agreed_ok(problem, rank, size, "loopgate_bench")) {
    MPI_Finalize();
    return 2;
  }

  try {
    register_step_benchmarks(cases, flags, rank);
    register_bookkeeping_benchmarks(/*reads_per_iteration=*/56);  // the baseline's on single (docs/performance.md)
    register_trace_gather_benchmarks();
    const bool host_forms = loopgate::gpu_flags().device == "cuda" && register_host_form_benchmarks();
    benchmark::AddCustomContext("loopgate_world", std::to_string(size));
    benchmark::AddCustomContext("loopgate_device", loopgate::gpu_flags().device);
    benchmark::AddCustomContext("loopgate_step_time",
                                loopgate::gpu_flags().device == "cuda"
                                    ? "CUDA events on the current stream per window, max over ranks, / window_iters"
                                    : "host clock per window, max over ranks, / window_iters");
    benchmark::AddCustomContext("loopgate_host_forms", host_forms ? "registered" : "not registered (no CUDA device)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loopgate_bench: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    NullReporter null;
    benchmark::RunSpecifiedBenchmarks(&null);
  }
  benchmark::Shutdown();
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
