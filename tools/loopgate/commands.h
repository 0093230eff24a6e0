// The loopgate CLI's subcommands. `run` executes inside an MPI job (one process per rank); `gate` and `golden`
// are plain processes that launch mpirun themselves; `ab` and `compare` read files of finished runs.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "fixtures/faults/fault_spec.h"
#include "tools/loopgate/run_flag_values.h"
#include "tools/loopgate/step_time_options.h"
#include "trainer/loop/train.h"

namespace CLI {
class App;
}

namespace loopgate {

// Each subcommand's flags are defined beside it (add_X_command, in X's file), so main() only dispatches.
CLI::App* add_run_command(CLI::App& app, RunFlags& flags);  // run_flags.cpp

struct RunOptions {
  RunFlags flags;  // as the user gave them: validation messages name these, not the config's internals
  RunConfig config;
  std::vector<FaultSpec> faults;  // --inject as parsed (config.faults injects them)
  std::string arm = "baseline";
  std::string trace_path;
  std::string syncs_json;  // rank 0's host reads as a loopgate-syncs/1 table
  bool syncs = false;
  bool quiet = false;  // no log lines (the gate's scenarios)
};

int cmd_run(const RunOptions& options);  // returns the process exit code

struct GateOptions {
  std::vector<std::string> fixtures;  // empty = every CPU fixture
  std::vector<std::string> arms;      // empty = default candidates
  std::vector<std::string> checks;    // empty = every gate
  std::optional<int64_t> iters;       // unset = each gate's default
  std::string json_path, junit_path;
  std::string suites_exe;             // the gate suites executable (default: beside this binary)
  std::string mpiexec = "mpiexec";
  int cpus = 0;    // the cores CPU launches may keep busy side by side, a rank each; 0 = auto (this process's cores)
  int shards = 0;  // processes sharing a fixture's gate suites; 0 = auto (cpus / ranks on CPU; a GPU block each on cuda)
  double progress_timeout = 60;  // a test whose rank makes no progress this long fails; the fixture relaunches
  std::string filter;            // a GoogleTest filter instead of the checks' (loopgate selftest)
  // false: an aborted attempt ends its launch, the tests it did not reach left unrun (the selftest's launch of one
  // hanging defect, whose first aborted test is its verdict).
  bool relaunch_after_abort = true;
  // true: an arm's tests after its first failing one are skipped (--lg_skip_rejected_arms: the selftest, which
  // judges a planted defect by its first rejection).
  bool skip_rejected_arms = false;
  bool echo = true;              // echo launches and scenario lines
  // cuda: every fixture whose ranks fit the visible GPUs (one rank per GPU) on the GPU tier (NCCL, bf16), plus the
  // GPU-only checks (ledger == CUPTI, the capture probe) from gpu_loop_exe.
  std::string device = "cpu";
  std::string gpu_loop_exe;  // default: suites/gpu/loopgate_gpu_loop beside the gate suites
};
int cmd_gate(const GateOptions& options);
CLI::App* add_gate_command(CLI::App& app, GateOptions& options);

// The suites over `fixtures` as `loopgate gate` runs them (relaunching after an abort), into `dir`: one
// FixtureRun each. For callers that judge the verdicts themselves.
struct FixtureRun;
struct Fixture;
std::vector<FixtureRun> run_gate_fixtures(const GateOptions& o, const std::vector<Fixture>& fixtures,
                                          const std::string& dir);

struct SelftestOptions {
  std::vector<std::string> defects;  // empty = the whole catalogue
  double progress_timeout = 10;      // the hang defects: how long a stuck rank waits before the watchdog fails it
  std::string json_path;
  std::string suites_exe, mpiexec = "mpiexec";
  std::string device = "cpu";  // cuda: the GPU tier (GPU-only defects run too)
  std::string gpu_loop_exe;
  std::string section = "all";  // defects | tools | all (tools: selftest_tools.h)
  std::string unit_exe, self_exe, source_dir;  // the tools section's (set by main)
};
int cmd_selftest(const SelftestOptions& options);
CLI::App* add_selftest_command(CLI::App& app, SelftestOptions& options);

struct GoldenOptions {
  bool check = false, update = false;
  std::vector<std::string> fixtures;
  std::string golden_dir = "golden";
  std::string self_exe;
  std::string mpiexec = "mpiexec";
  std::string device = "cpu";  // cuda: golden values of the GPU tier (<fixture>/*_cuda.json), fixtures that fit
  std::string capture_dir;  // internal: run inside `mpiexec -n N loopgate golden --capture DIR --fixture F`
};
int cmd_golden(const GoldenOptions& options);
CLI::App* add_golden_command(CLI::App& app, GoldenOptions& options);

// `loopgate ab A B`: step time of two runs (Megatron logs, Traces, golden values with iteration-time).
struct AbOptions {
  std::string a, b, json_path;
  double alpha = 0.05;
  StepTimeOptions step;
};
int cmd_ab(const AbOptions& options);  // 0 report printed, 2 bad input

// `loopgate ab --arms A,B` inside mpirun: the arms alternate in phases over one model (tools/loopgate/ab_phases.cpp).
struct AbPhaseOptions {
  RunOptions run;                 // the fixture and run flags (--iters, --trace, --syncs, --arm, --inject: refused)
  std::string arm_a, arm_b;
  int phases = 6;                 // per arm; the first of each is warm-up
  int64_t phase_iters = 20;       // iterations per phase (a multiple of --log-interval)
  double alpha = 0.05;
  std::string json_path;
};
int cmd_ab_phases(const AbPhaseOptions& options);  // 0 measured (arms bit-identical), 1 not bit-identical, 2 bad input

// `loopgate ab` as parsed: run files, or --arms with the in-process options (ab_phases.cpp dispatches).
struct AbCommand {
  AbOptions files;
  AbPhaseOptions phases;
  RunFlags run;
  std::vector<std::string> arms;
};
CLI::App* add_ab_command(CLI::App& app, AbCommand& command);
int cmd_ab_command(AbCommand command);
// --json, --alpha and the step-time options of ab, compare and pair (ab.cpp).
void add_step_time_flags(CLI::App* cmd, std::string& json_path, double& alpha, StepTimeOptions& step);

// `loopgate compare --a ... --b ...`: did the change keep the numbers (docs/compare.md).
struct CompareOptions {
  std::vector<std::string> a, b;
  int64_t early = 2;  // lm loss and params norm identical at iterations 1..early
  std::string json_path;
  double alpha = 0.05;
  StepTimeOptions step;
};
int cmd_compare(const CompareOptions& options);  // 0 every check that ran passed, 1 one failed, 2 bad input
CLI::App* add_compare_command(CLI::App& app, CompareOptions& options);

// MPI_Init for a process that is one rank of a job (run, golden --capture).
void cli_mpi_init(int* rank, int* size);

// Sets the Open MPI environment a root, oversubscribed container needs before launching mpiexec.
void set_mpi_launch_env();

// Prints one line "loopgate: error: ..." on rank 0 (or everywhere outside MPI) and returns 2.
int input_error(const std::string& what);
bool is_rank_zero_env();

}  // namespace loopgate
