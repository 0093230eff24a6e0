// loopgate::Error and the CHECK macros. Errors propagate (nccl-tests style) instead of exiting, carrying
// the call text, file:line, rank and the ledger's current site, so the gtest main or the CLI can print one
// line and abort the world — a rank that exit()s alone leaves the others hanging in a collective.
#pragma once
#include <fmt/format.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace loopgate {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input (unknown arm, wrong np, malformed spec): the CLI maps it to exit code 2.
class InputError : public Error {
 public:
  using Error::Error;
};

// This process's rank in the world, or -1 before MPI is up. Set once by whoever initialises MPI.
int& world_rank_for_errors();
// Name of the sync site / phase the rank is in; updated by the ledger and the loop (for the watchdog too).
const char* current_site();
void set_current_site(const char* site);
// The innermost ScopedSite's name: like current_site, but a ledger read does not change it (a read names its site
// for the watchdog and CUPTI without scoping it). The collective recorder attributes each collective to it, so the
// numerics path's collectives carry "numerics" in every arm, whatever the arm read before them.
const char* current_scope();
// The training iteration in progress (0 before the first); set by Ledger::begin_iteration. The CUPTI sync
// counter reads it (with current_site) to attribute each driver call on the calling thread.
long long current_iteration();
void set_current_iteration(long long iteration);
// The same without telling the observer: reads that land for an earlier iteration (Ledger::CountAs) are attributed
// to it, and no profile window opens for it again.
void set_current_iteration_quietly(long long iteration);
// One observer of every set_current_iteration, called on the setting thread after the change (null: none). The
// CUPTI counter's profile mode timestamps iteration boundaries with it, so the loop carries no profiling code.
using IterationObserver = void (*)(long long iteration);
void set_iteration_observer(IterationObserver observer);

// Progress: a counter every site change, iteration and collective bumps. The progress watchdog fails a scenario
// whose rank stops moving (a rank stuck in a collective its peers never join makes none).
void note_progress();
unsigned long long progress_count();
// The scenario in progress ("" outside one), for the watchdog's line: "KEY arm ARM".
void set_current_scenario(const std::string& scenario);
std::string current_scenario();
// One observer of every set_current_scenario (empty: none), called on the setting thread: the harness's rank 0
// writes each scenario to its progress file, so a launcher knows the scenario a job died in even when no rank
// could say (a rank killed outright).
void set_scenario_observer(std::function<void(const std::string& scenario)> observer);
// Run by the watchdog before it aborts the job: a backend that can hang outside MPI registers how to break out
// (NCCL: ncclCommAbort of its communicators). Hooks must be safe to call from another thread.
int add_abort_hook(std::function<void()> hook);  // returns an id for remove_abort_hook
void remove_abort_hook(int id);
void run_abort_hooks();

// Names the site (or loop phase) of the work done in this scope — CUPTI, the operator counter and the watchdog
// attribute to it — and gives the previous name back at scope exit. `site` must have static storage.
class ScopedSite {
 public:
  explicit ScopedSite(const char* site) : previous_(current_site()), previous_scope_(current_scope()) {
    set_current_site(site);
    set_scope(site);
  }
  ~ScopedSite() {
    set_current_site(previous_);
    set_scope(previous_scope_);
  }
  ScopedSite(const ScopedSite&) = delete;
  ScopedSite& operator=(const ScopedSite&) = delete;

 private:
  static void set_scope(const char* scope);
  const char* previous_;
  const char* previous_scope_;
};

[[noreturn]] void throw_error(const char* file, int line, const std::string& what);

}  // namespace loopgate

#define LG_CHECK(cond, ...)                                                                     \
  do {                                                                                          \
    if (!(cond)) ::loopgate::throw_error(__FILE__, __LINE__,                                   \
                                         std::string("check failed: " #cond ": ") + fmt::format(__VA_ARGS__)); \
  } while (0)

#define LG_INPUT_CHECK(cond, ...)                                                               \
  do {                                                                                          \
    if (!(cond)) throw ::loopgate::InputError(fmt::format(__VA_ARGS__));                        \
  } while (0)

#define LG_MPI_CHECK(call)                                                                      \
  do {                                                                                          \
    int lg_mpi_rc_ = (call);                                                                    \
    if (lg_mpi_rc_ != 0) ::loopgate::throw_error(__FILE__, __LINE__,                           \
                                                 fmt::format("MPI call failed (rc {}): {}", lg_mpi_rc_, #call)); \
  } while (0)
