// Bad input refused before any work, in every subcommand: the checks that need more than one flag or the job
// (world size, model shape against the layout, batch divisibility, LR relations, --inject against the run,
// output paths writable, launchers found). Each throws InputError with one line naming the user's flag and
// value (never an internal sample count); the CLI prints it as `loopgate: error: ...` and exits 2.
// `loopgate report` checks its paths itself (paths.h). Not here: each run flag's own range (run_flags.h); the
// library-level LG_INPUT_CHECKs, which stay as a backstop.
#pragma once
#include <string>

#include "tools/loopgate/commands.h"
#include "tools/loopgate/paths.h"
#include "tools/loopgate/run_flags.h"

namespace loopgate {

// LOOPGATE_VALIDATE_ONLY=1: a subcommand checks its arguments as always, then prints "loopgate: arguments valid"
// and returns true, and the caller exits 0 before any work (a CI pre-flight; the generated bad-input rows'
// accepted values, suites/cli/bad_input_generated.py). Called where a subcommand's input checks end.
bool stop_after_validation();

// `loopgate run` on a job of `world` ranks: a pure function of the options and the world, so every rank reaches
// the same verdict before any collective. Includes the --trace path check (stat only: nothing is created).
void validate_run_options(const RunOptions& options, int world);

// The grad buckets rank `rank` will have: its parameters' shapes (no model built) laid out the way GradBuffer
// lays them out (trainer/optim/grad_buffer.h layout_grad_buckets).
int grad_buckets_of_rank(const RunConfig& config, const Layout& layout, int rank);

void validate_gate_options(const GateOptions& options);
void validate_golden_options(const GoldenOptions& options);
void validate_ab_options(const AbOptions& options);
// --arms, --phases, --phase-iters (a multiple of --log-interval), the run flags (validate_run_options) and that
// none of the run flags ab sets itself was given.
void validate_ab_phase_options(const AbPhaseOptions& options, int world_size);
// One side of `ab --arms`: an arm name, optionally NAME:digests (the arm taking digests, trainer/measure/digests.h)
// or NAME:bare (the same arm with loopgate's bookkeeping off: the
// ledger counts nothing, a deferred arm's level-1 timers record nothing; TrainSession::run). InputError naming
// --arms for an unknown arm or suffix.
struct AbArm {
  const Arm* arm = nullptr;
  bool instrumented = true;
  bool digests = false;  // NAME:digests: the arm with --digests on (A,A:digests prices them)
};
AbArm parse_ab_arm(const std::string& spec);
void validate_compare_options(const CompareOptions& options);

// Every rank's verdict on its input, agreed before any collective of the run: the lowest rank with a problem
// prints "<program>: error: <problem>"; true when no rank has one (one MPI_Allreduce over the world).
bool input_agreed_ok(const std::string& problem, int rank, int size, const char* program = "loopgate");

}  // namespace loopgate
