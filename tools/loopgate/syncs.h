// `loopgate syncs [flags] -- CMD...`: host syncs per iteration per Python site of any CUDA program, PyTorch and
// Megatron-LM included, with no edit of its source: CMD runs with the injection library (tools/cupti) and the
// Python shim that marks each call of a named function as an iteration; each process writes its table, and the
// merged table is printed. `loopgate syncs --diff A.json B.json`: two runs' tables side by side, per site.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tools/analysis/stats.h"

namespace loopgate {

struct SyncsOptions {
  std::vector<std::string> command;
  std::string iter_fn = "megatron.training.training:train_step";
  std::string iters;                // "A-B": the marked iterations counted (default: every one)
  std::string out_dir = "loopgate-syncs";
  std::string json_path, csv_path;  // the merged table
  std::vector<std::string> diff;    // two tables
  std::string table;                // a saved table (a process's or a merged one), printed instead of a run
  std::string inject_lib;           // default: beside this executable's build
  bool launches = false, nvtx = false;
  bool overhead_ab = false;    // alternate counted and uncounted iterations; print the counter's overhead
  double overhead_limit = 3;   // percent of the uncounted median
  std::string self_exe;
};

CLI::App* add_syncs_command(CLI::App& app, SyncsOptions& o);
int cmd_syncs(const SyncsOptions& o);  // CMD's exit code, 1 if nothing was counted, 2 bad input

// One (site, kind) row of a table: syncs per iteration, averaged over the processes that counted (exposed for tests).
struct SyncSiteRow {
  std::string site, kind;
  double per_iteration = 0;
  int64_t total = 0;
};
// The counter's environment for one run whose tables go to the absolute folder `dir` (o.inject_lib set): the
// injection library, the Python shim on PYTHONPATH, the iteration function, the region. `loopgate pair` uses it too.
std::vector<std::pair<std::string, std::string>> counter_environment(const SyncsOptions& o, const std::string& dir);
// Every process's table in `dir` (syncs.PID.json), by name.
std::vector<nlohmann::json> read_sync_tables(const std::string& dir);
std::string default_inject_lib(const std::string& self);
// A JSON file named by `flag` (readable, parsed; InputError naming both otherwise).
nlohmann::json read_json_file(const std::string& flag, const std::string& path);

// The counter's overhead from one process's alternating iterations (its table's "overhead_ab"). Each counted
// iteration is paired with the mean of the uncounted iterations on either side of it: neighbours share the run's
// drift (clocks, neighbours on the host, the data), so the differences hold the counter's cost and the
// iteration-to-iteration noise alone. The verdict against `limit_pct` of the uncounted iterations' median: the
// 95 % interval of the mean difference (normal) lies at or below the limit ("within"), above it ("over"), or
// across it ("undecided"). `stats`: the unpaired A/B of the two arms' times, for context. Unset with fewer than
// 10 pairs.
struct OverheadAb {
  AbStats stats;
  int64_t pairs = 0;
  // The paired differences' Hodges-Lehmann location and its 95 % signed-rank interval (stats.h: paired_shift),
  // which the verdict reads; their mean only informs (a host stall in one iteration moves it by ms).
  double location_ms = 0, low_ms = 0, high_ms = 0, mean_ms = 0;
  double low_pct = 0, high_pct = 0;             // the interval as a share of the uncounted median
  std::string verdict;               // within | over | undecided
  std::string sentence;
};
std::optional<OverheadAb> overhead_ab(const nlohmann::json& process, double limit_pct);

std::vector<SyncSiteRow> sync_site_rows(const nlohmann::json& table, const std::string& name);
std::string format_sync_diff(const std::vector<SyncSiteRow>& a, const std::vector<SyncSiteRow>& b,
                             const std::string& name_a, const std::string& name_b);

}  // namespace loopgate
