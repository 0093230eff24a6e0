// The loopgate CLI's subcommands. `run` executes inside an MPI job (one process per rank); `gate` and `golden`
// are plain processes that launch mpirun themselves.
#pragma once
#include <string>
#include <vector>

#include "trainer/loop/train.h"

namespace loopgate {

struct RunOptions {
  RunConfig config;
  std::string arm = "baseline";
  std::string trace_path;
  bool syncs = false;
  bool quiet = false;  // no log lines (the gate's scenarios)
};

int cmd_run(const RunOptions& options);  // returns the process exit code

struct GateOptions {
  std::vector<std::string> fixtures;  // empty = every CPU fixture
  std::vector<std::string> arms;      // empty = default candidates
  std::vector<std::string> checks;    // empty = every gate
  int64_t iters = 0;                  // 0 = each gate's default
  std::string json_path, junit_path;
  std::string suites_exe;             // the gate suites executable (default: beside this binary)
  std::string mpiexec = "mpiexec";
  int jobs = 1;  // fixtures of <= 2 ranks run this many at a time
};
int cmd_gate(const GateOptions& options);

struct GoldenOptions {
  bool check = false, update = false;
  std::vector<std::string> fixtures;
  std::string golden_dir = "golden";
  std::string self_exe;
  std::string mpiexec = "mpiexec";
  std::string capture_dir;  // internal: run inside `mpiexec -n N loopgate golden --capture DIR --fixture F`
};
int cmd_golden(const GoldenOptions& options);

// MPI_Init for a process that is one rank of a job (run, golden --capture).
void cli_mpi_init(int* rank, int* size);

// Sets the Open MPI environment a root, oversubscribed container needs before launching mpiexec.
void set_mpi_launch_env();

// Prints one line "loopgate: error: ..." on rank 0 (or everywhere outside MPI) and returns 2.
int input_error(const std::string& what);
bool is_rank_zero_env();

}  // namespace loopgate
