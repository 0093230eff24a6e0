// `loopgate ab --arms A,B` (inside mpirun): is B faster than A, measured inside one process. The arms alternate
// in phases of W iterations over ONE model and ONE data stream — A B A B ... — so drift (clocks, neighbours,
// thermal) hits both alike; the first phase of each arm is warm-up and dropped. Per phase: milliseconds per
// iteration from host timestamps taken with the device drained and every rank at a barrier. Sound only because
// the arms are bit-identical: afterwards a single-arm run of A over the same iterations must log the same values
// at every log point on every rank (checked; exit 1 when not). Statistics: fixtures/stats.h, printed like the
// file mode (tools/loopgate/ab.h).
#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>

#include "fixtures/compare.h"
#include "fixtures/fixtures.h"
#include "fixtures/stats.h"
#include "tools/loopgate/ab.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/device.h"
#include "trainer/common/error.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/instrument/device_cuda.h"
#endif

namespace loopgate {
namespace {

// Every rank here with its device idle: the phase's time is all of its work and none of the next's.
double drained_now() {
#if LOOPGATE_HAS_CUDA
  if (run_device().is_cuda()) cuda_device_synchronize();
#endif
  MPI_Barrier(MPI_COMM_WORLD);
  return MPI_Wtime();
}

struct PhaseRecord {
  int phase;
  std::string arm;
  int64_t first_iteration, iterations;
  double ms_per_iteration;
  bool warmup;
};

RunConfig phase_config(const AbPhaseOptions& o) {
  RunConfig c = o.run.config;
  c.train_iters = 2 * o.phases * o.phase_iters;
  c.param_checksums = false;  // timing runs measure the loop, not the Trace's diagnostics
  c.count_launches = false;
  return c;
}

// A's single-arm run, and the alternating run, log the same values at every log point on every rank.
std::vector<Mismatch> identity_check(const RunGroups& g, const Arm& a, const Trace& alternating, int rank) {
  RunConfig c = g.config;
  ProcessGroups groups = g.groups;
  TrainSession ref(c, a, groups, rank);
  ref.run(a, c.train_iters);
  RunResult r = ref.finish();
  const Trace reference = gather_trace(r, MPI_COMM_WORLD);
  return compare_fields(reference, alternating,
                        {"lm_loss", "params_norm", "grad_norm", "num_zeros", "learning_rate", "loss_scale", "skipped"});
}

}  // namespace

int cmd_ab_phases(const AbPhaseOptions& o) {
  int rank = 0, size = 1;
  cli_mpi_init(&rank, &size);
  std::string problem;
  try {
    validate_ab_phase_options(o, size);
  } catch (const InputError& e) {
    problem = e.what();
  }
  int first_bad = problem.empty() ? size : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first_bad < size) {
    if (rank == first_bad) std::fprintf(stderr, "loopgate: error: %s\n", problem.c_str());
    MPI_Finalize();
    return 2;
  }
  int code = 0;
  try {
    const Arm& a = find_arm(o.arm_a);
    const Arm& b = find_arm(o.arm_b);
    RunGroups g = make_run_groups(phase_config(o), MPI_COMM_WORLD);
    set_run_device(g.config.model.device);
    std::vector<PhaseRecord> phases;
    AbSamples sa, sb;
    sa.label = "A";
    sb.label = "B";
    sa.names = {o.arm_a};
    sb.names = {o.arm_b};
    sa.source = sb.source = fmt::format("phases of {} it.", o.phase_iters);
    sa.notes = {"the arms alternate in one process over one model and data stream (A B A B ...); each phase's time "
                "is taken with the device drained and every rank at a barrier"};
    Trace alternating;
    {
      TrainSession session(g.config, a, g.groups, rank);
      for (int p = 0; p < 2 * o.phases; ++p) {
        const Arm& arm = p % 2 == 0 ? a : b;
        const int64_t first = session.iterations_done() + 1;
        const double t0 = drained_now();
        session.run(arm, o.phase_iters);
        const double t1 = drained_now();
        const double ms = (t1 - t0) * 1000.0 / static_cast<double>(o.phase_iters);
        const bool warmup = p < 2;
        phases.push_back({p + 1, arm.name, first, o.phase_iters, ms, warmup});
        AbSamples& side = p % 2 == 0 ? sa : sb;
        ++side.windows;
        if (warmup) {
          ++side.dropped;
        } else {
          side.samples.push_back(ms);
        }
      }
      RunResult r = session.finish();
      alternating = gather_trace(r, MPI_COMM_WORLD);
    }
    const std::vector<Mismatch> m = identity_check(g, a, alternating, rank);
    set_run_device(c10::Device(c10::kCPU));
    if (rank == 0) {
      std::printf("loopgate ab: fixture %s, %d ranks, %s vs %s, %d phases of %lld iterations each (A B A B ...), "
                  "log interval %d\n", g.config.fixture.c_str(), size, o.arm_a.c_str(), o.arm_b.c_str(),
                  2 * o.phases, static_cast<long long>(o.phase_iters), g.config.log_interval);
      std::printf("%-6s %-12s %-12s %14s\n", "phase", "arm", "iterations", "ms/iteration");
      for (const PhaseRecord& p : phases)
        std::printf("%-6d %-12s %5lld-%-6lld %14.3f%s\n", p.phase, p.arm.c_str(),
                    static_cast<long long>(p.first_iteration),
                    static_cast<long long>(p.first_iteration + p.iterations - 1), p.ms_per_iteration,
                    p.warmup ? "  (warm-up, dropped)" : "");
      std::printf("\n");
      const AbStats s = ab_statistics(sa.samples, sb.samples, o.alpha);
      print_ab_report(stdout, sa, sb, s);
      std::printf("bit identity: %s\n",
                  m.empty() ? "the alternating run logged the same values as A alone at every log point, every rank"
                            : ("DIFFERS from A alone: the arms are not bit-identical, so this comparison is void\n" +
                               describe(m, o.arm_a + " alone", "alternating")).c_str());
      if (!o.json_path.empty()) {
        nlohmann::json j = ab_report_json(sa, sb, s);
        j["mode"] = "phases";
        j["arms"] = {o.arm_a, o.arm_b};
        j["bit_identical"] = m.empty();
        for (const PhaseRecord& p : phases)
          j["phases"].push_back({{"phase", p.phase}, {"arm", p.arm}, {"first_iteration", p.first_iteration},
                                 {"iterations", p.iterations}, {"ms_per_iteration", p.ms_per_iteration},
                                 {"warmup", p.warmup}});
        std::ofstream(o.json_path) << j.dump(1) << "\n";
      }
      std::fflush(stdout);
    }
    code = m.empty() ? 0 : 1;
  } catch (const InputError& e) {
    std::fprintf(stderr, "loopgate: error: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loopgate: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}

}  // namespace loopgate
