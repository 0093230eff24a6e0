// `loopgate ab --arms A,B` (inside mpirun): is B faster than A, measured inside one process. The arms alternate
// in phases of W iterations over ONE model and ONE data stream — A B A B ... — so drift (clocks, neighbours,
// thermal) hits both alike; the first phase of each arm is warm-up and dropped. Per phase: milliseconds per
// iteration from host timestamps taken with the device drained and every rank at a barrier. Sound only because
// the arms are bit-identical: afterwards a single-arm run of A over the same iterations must log the same values
// at every log point on every rank (checked; exit 1 when not). Statistics: tools/analysis/stats.h, printed like the
// file mode (tools/loopgate/ab.h). Beside wall time, each phase's process CPU time per iteration (rank 0, every
// thread: the loop's and autograd's), with its own statistics: a host-bound loop's CPU time moves with the host
// work an arm adds, while a shared machine's neighbours stretch wall time, not it. With --profile (GPU): each arm's device idle and sync-starved time per
// iteration from CUPTI activity records (docs/profile.md), its A-B delta printed next to the step-time delta.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "fixtures/compare.h"
#include "fixtures/fixtures.h"
#include "tools/analysis/stats.h"
#include "tools/loopgate/ab.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/run_flags.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/device.h"
#include "trainer/common/error.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/timers/device_cuda.h"
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

// This process's CPU time in seconds, every thread.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct PhaseRecord {
  int phase;
  std::string arm;
  int64_t first_iteration, iterations;
  double ms_per_iteration;
  double cpu_ms_per_iteration;  // this rank's process CPU time
  bool warmup;
};

RunConfig phase_config(const AbPhaseOptions& o) {
  RunConfig c = o.run.config;
  c.train_iters = 2 * o.phases * o.phase_iters;
  c.param_checksums = false;  // timing runs measure the loop, not the Trace's diagnostics
  c.count_launches = false;
  c.digests = parse_ab_arm(o.arm_a).digests || parse_ab_arm(o.arm_b).digests;  // a side's :digests
  return c;
}

// ---- --profile: per arm, the median over its measured phases of each phase's mean ms per iteration ----

struct ArmProfile {
  std::string arm;
  double step_ms = 0;  // the phases' ms/iteration (host timestamps, device drained), as the report's median
  StarvationRow device;  // window, busy, idle, sync-starved, other idle (kernels, copies, syncs per iteration)
  size_t phases = 0;
};

double median(const std::vector<double>& v) { return v.empty() ? 0.0 : median_of(v); }

ArmProfile arm_profile(const std::string& arm, const std::vector<PhaseRecord>& phases,
                       const std::vector<StarvationRow>& rows) {
  ArmProfile out;
  out.arm = arm;
  std::vector<double> step;
  std::vector<StarvationRow> means;  // one per measured phase
  for (const PhaseRecord& p : phases) {
    if (p.warmup || p.arm != arm) continue;
    std::vector<StarvationRow> in_phase;
    for (const StarvationRow& r : rows)
      if (r.iteration >= p.first_iteration && r.iteration < p.first_iteration + p.iterations) in_phase.push_back(r);
    if (in_phase.empty()) continue;
    step.push_back(p.ms_per_iteration);
    means.push_back(summarize_starvation(in_phase).mean);
  }
  out.phases = step.size();
  out.step_ms = median(step);
  out.device = summarize_starvation(means).median;
  out.device.iteration = 0;
  return out;
}

void print_arm_profiles(const ArmProfile& a, const ArmProfile& b, int64_t dropped) {
  std::printf("\ndevice profile, rank 0 (CUPTI activity; docs/profile.md): per arm, the median over its measured "
              "phases of each phase's mean per iteration\n");
  std::printf("%-5s %-12s %7s %10s %10s %10s %10s %14s %13s %11s %8s %6s\n", "side", "arm", "phases", "step-ms",
              "window-ms", "busy-ms", "idle-ms", "launch-starved", "sync-starved", "other-idle", "kernels", "syncs");
  for (const ArmProfile* p : {&a, &b})
    std::printf("%-5s %-12s %7zu %10.3f %10.3f %10.3f %10.3f %14.3f %13.3f %11.3f %8lld %6lld\n",
                p == &a ? "A" : "B", p->arm.c_str(), p->phases, p->step_ms, p->device.window_ms, p->device.busy_ms,
                p->device.idle_ms, p->device.launch_starved_ms, p->device.sync_starved_ms, p->device.other_idle_ms,
                static_cast<long long>(p->device.kernels), static_cast<long long>(p->device.syncs));
  std::printf("A - B: step time %+.3f ms/iteration, launch-starved %+.3f, sync-starved %+.3f, idle %+.3f "
              "(removing host syncs should shrink launch-starved idle by about the step delta)\n",
              a.step_ms - b.step_ms, a.device.launch_starved_ms - b.device.launch_starved_ms,
              a.device.sync_starved_ms - b.device.sync_starved_ms, a.device.idle_ms - b.device.idle_ms);
  if (dropped > 0)
    std::printf("WARNING: CUPTI dropped %lld activity record(s): busy time is a lower bound\n",
                static_cast<long long>(dropped));
}

nlohmann::json arm_profile_json(const ArmProfile& p) {
  return {{"arm", p.arm},
          {"phases", p.phases},
          {"step_ms", p.step_ms},
          {"window_ms", p.device.window_ms},
          {"busy_ms", p.device.busy_ms},
          {"idle_ms", p.device.idle_ms},
          {"launch_starved_ms", p.device.launch_starved_ms},
          {"sync_starved_ms", p.device.sync_starved_ms},
          {"other_idle_ms", p.device.other_idle_ms}};
}

// A's single-arm run, and the alternating run, log the same values at every log point on every rank.
std::vector<Mismatch> identity_check(const RunGroups& g, const AbArm& a, const Trace& alternating, int rank) {
  RunConfig c = g.config;
  ProcessGroups groups = g.groups;
  TrainSession ref(c, *a.arm, groups, rank);
  ref.run(*a.arm, c.train_iters, a.instrumented, a.digests);
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
  if (!input_agreed_ok(problem, rank, size)) {
    MPI_Finalize();
    return 2;
  }
  if (stop_after_validation()) {
    MPI_Finalize();
    return 0;
  }
  int code = 0;
  try {
    const AbArm spec_a = parse_ab_arm(o.arm_a);
    const AbArm spec_b = parse_ab_arm(o.arm_b);
    const Arm& a = *spec_a.arm;
    RunGroups g = make_run_groups(phase_config(o), MPI_COMM_WORLD);
    set_run_device(g.config.model.device);
    std::vector<PhaseRecord> phases;
    AbSamples sa, sb;
    std::vector<double> cpu_a, cpu_b;  // per measured phase, rank 0's CPU ms per iteration
    sa.label = "A";
    sb.label = "B";
    sa.names = {o.arm_a};
    sb.names = {o.arm_b};
    sa.source = sb.source = fmt::format("phases of {} it.", o.phase_iters);
    sa.notes = {"the arms alternate in one process over one model and data stream (A B A B ...); each phase's time "
                "is taken with the device drained and every rank at a barrier"};
    Trace alternating;
    const bool profiling = profile_start_if_asked(rank);
    {
      TrainSession session(g.config, a, g.groups, rank);
      for (int p = 0; p < 2 * o.phases; ++p) {
        const AbArm& side_arm = p % 2 == 0 ? spec_a : spec_b;
        const int64_t first = session.iterations_done() + 1;
        const double t0 = drained_now();
        const double c0 = process_cpu_seconds();
        session.run(*side_arm.arm, o.phase_iters, side_arm.instrumented, side_arm.digests);
        profile_end_window();  // the drain and the next arm's set-up belong to no iteration
        const double t1 = drained_now();
        const double c1 = process_cpu_seconds();
        const double ms = (t1 - t0) * 1000.0 / static_cast<double>(o.phase_iters);
        const double cpu_ms = (c1 - c0) * 1000.0 / static_cast<double>(o.phase_iters);
        const bool warmup = p < 2;
        phases.push_back({p + 1, p % 2 == 0 ? o.arm_a : o.arm_b, first, o.phase_iters, ms, cpu_ms, warmup});
        AbSamples& side = p % 2 == 0 ? sa : sb;
        ++side.windows;
        if (warmup) {
          ++side.dropped;
        } else {
          side.samples.push_back(ms);
          (p % 2 == 0 ? cpu_a : cpu_b).push_back(cpu_ms);
        }
      }
      RunResult r = session.finish();
      alternating = gather_trace(r, MPI_COMM_WORLD);
    }
    profile_stop();  // before the identity run, whose iterations would repeat these numbers
    const ProfileReport profile = profiling ? profile_report() : ProfileReport{};
    const std::vector<Mismatch> m = identity_check(g, spec_a, alternating, rank);
    set_run_device(c10::Device(c10::kCPU));
    if (rank == 0) {
      std::printf("loopgate ab: fixture %s, %d ranks, %s vs %s, %d phases of %lld iterations each (A B A B ...), "
                  "log interval %d\n", g.config.fixture.c_str(), size, o.arm_a.c_str(), o.arm_b.c_str(),
                  2 * o.phases, static_cast<long long>(o.phase_iters), g.config.log_interval);
      std::printf("%-6s %-12s %-12s %14s %18s\n", "phase", "arm", "iterations", "ms/iteration",
                  "cpu-ms/iteration");
      for (const PhaseRecord& p : phases)
        std::printf("%-6d %-12s %5lld-%-6lld %14.3f %18.3f%s\n", p.phase, p.arm.c_str(),
                    static_cast<long long>(p.first_iteration),
                    static_cast<long long>(p.first_iteration + p.iterations - 1), p.ms_per_iteration,
                    p.cpu_ms_per_iteration, p.warmup ? "  (warm-up, dropped)" : "");
      std::printf("\n");
      const AbStats s = ab_statistics(sa.samples, sb.samples, o.alpha);
      print_ab_report(stdout, sa, sb, s);
      const AbStats cpu = ab_statistics(cpu_a, cpu_b, o.alpha);
      std::printf("host CPU time, rank 0 (process, every thread): median %.3f vs %.3f ms/iteration, ratio B/A %.4f; "
                  "shift %.3f ms, %.0f %% CI %.3f to %.3f; Mann-Whitney %s p = %.4g (%lld v %lld)%s\n",
                  cpu.median_a, cpu.median_b, cpu.ratio, cpu.shift, 100.0 * cpu.ci_coverage, cpu.ci_low,
                  cpu.ci_high, cpu.method.c_str(), cpu.p_value, static_cast<long long>(cpu.n_a),
                  static_cast<long long>(cpu.n_b), cpu.significant ? ": significant" : ": not significant");
      std::printf("bit identity: %s\n",
                  m.empty() ? "the alternating run logged the same values as A alone at every log point, every rank"
                            : ("DIFFERS from A alone: the arms are not bit-identical, so this comparison is void\n" +
                               describe(m, o.arm_a + " alone", "alternating")).c_str());
      ArmProfile pa, pb;
      if (profile.available) {
        pa = arm_profile(o.arm_a, phases, profile.rows);
        pb = arm_profile(o.arm_b, phases, profile.rows);
        print_arm_profiles(pa, pb, profile.dropped_records);
        std::printf("launch times joined for %lld of %lld device intervals (sync-starved follows a drain only "
                    "through work whose launch time is known)\n",
                    static_cast<long long>(profile.launch_times), static_cast<long long>(profile.intervals));
      }
      if (!o.json_path.empty()) {
        nlohmann::json j = ab_report_json(sa, sb, s);
        j["mode"] = "phases";
        j["arms"] = {o.arm_a, o.arm_b};
        j["bit_identical"] = m.empty();
        j["host_cpu"] = {{"rank", 0},           {"median_a_ms", cpu.median_a}, {"median_b_ms", cpu.median_b},
                         {"ratio", cpu.ratio},  {"shift_ms", cpu.shift},       {"ci_low_ms", cpu.ci_low},
                         {"ci_high_ms", cpu.ci_high}, {"p_value", cpu.p_value}, {"significant", cpu.significant}};
        for (const PhaseRecord& p : phases)
          j["phases"].push_back({{"phase", p.phase}, {"arm", p.arm}, {"first_iteration", p.first_iteration},
                                 {"iterations", p.iterations}, {"ms_per_iteration", p.ms_per_iteration},
                                 {"cpu_ms_per_iteration", p.cpu_ms_per_iteration}, {"warmup", p.warmup}});
        if (profile.available)
          j["profile"] = {{"rank", 0},
                          {"a", arm_profile_json(pa)},
                          {"b", arm_profile_json(pb)},
                          {"step_delta_ms", pa.step_ms - pb.step_ms},
                          {"launch_starved_delta_ms", pa.device.launch_starved_ms - pb.device.launch_starved_ms},
                          {"sync_starved_delta_ms", pa.device.sync_starved_ms - pb.device.sync_starved_ms},
                          {"dropped_records", profile.dropped_records},
                          {"intervals", profile.intervals},
                          {"launch_times", profile.launch_times}};
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

CLI::App* add_ab_command(CLI::App& app, AbCommand& c) {
  AbOptions& ab = c.files;
  AbPhaseOptions& abp = c.phases;
  RunFlags& abrf = c.run;
  std::vector<std::string>& ab_arms = c.arms;
  CLI::App* ab_cmd = app.add_subcommand(
      "ab", "step time A vs B: from two runs' files (Megatron logs, Traces, golden values), or, inside mpirun with "
            "--arms A,B, two arms alternating in phases over one model");
  ab_cmd->add_option("a", ab.a, "run A: Megatron log, loopgate Trace or golden-values JSON (readable)");
  ab_cmd->add_option("b", ab.b, "run B (readable)");
  add_step_time_flags(ab_cmd, ab.json_path, ab.alpha, ab.step);
  ab_cmd->add_option("--arms", ab_arms, "in-process mode: the two arms A,B that alternate (inside mpirun); NAME:bare "
                                       "is NAME with loopgate's bookkeeping off (A,A:bare prices it), NAME:digests NAME taking --digests "
                                       "(A,A:digests prices them)")
      ->delimiter(',');
  ab_cmd->add_option("--phases", abp.phases, "in-process: phases per arm, >= 3 (the first is warm-up; default 6)");
  ab_cmd->add_option("--phase-iters", abp.phase_iters,
                     "in-process: iterations per phase, >= 1, a multiple of --log-interval (default 20)");
  add_run_flags(ab_cmd, abrf);
  add_gpu_flags(ab_cmd, gpu_flags());
  return ab_cmd;
}

int cmd_ab_command(AbCommand c) {
  AbOptions& ab = c.files;
  AbPhaseOptions& abp = c.phases;
  if (c.arms.empty()) {
    LG_INPUT_CHECK(!ab.a.empty() && !ab.b.empty(), "ab: give two run files (loopgate ab A B), or --arms A,B inside "
                                                   "mpirun to alternate two arms in one process");
    LG_INPUT_CHECK(!gpu_flags().profile, "--profile: ab profiles the device only in-process (--arms A,B "
                                         "--device cuda inside mpirun), not from run files");
    return cmd_ab(ab);
  }
  LG_INPUT_CHECK(c.arms.size() == 2, "--arms {}: exactly two arms, A,B", fmt::join(c.arms, ","));
  LG_INPUT_CHECK(ab.a.empty(), "ab --arms: no run files ({} given): the arms run here", ab.a);
  abp.run = to_run_options(c.run);
  abp.arm_a = c.arms[0];
  abp.arm_b = c.arms[1];
  abp.alpha = ab.alpha;
  abp.json_path = ab.json_path;
  return cmd_ab_phases(abp);
}

}  // namespace loopgate
