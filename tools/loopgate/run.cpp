// `loopgate run`: one arm on one fixture, inside an MPI job. Input is validated identically on every rank
// before any collective (validate.h), so bad input exits 2 everywhere with one line from rank 0; a failure
// after that aborts the whole job (no rank is left waiting in a collective).
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include <unistd.h>

#include <fstream>
#include <map>

#include "fixtures/fixtures.h"
#include "tools/analysis/megatron_log.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/error.h"
#include "trainer/loop/checkpoint.h"
#include "trainer/measure/ledger.h"
#include "trainer/measure/sync_table_file.h"

namespace loopgate {
namespace {

std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return fmt::format("{}.{:06d}", buf, us);
}

using PerSite = std::map<std::string, int64_t> IterationRecord::*;

// Sites in the ledger's order, then any other name a table holds (numerics, diagnostic_checksum).
std::vector<std::string> table_rows(const std::vector<const IterationRecord*>& recs, PerSite field) {
  std::vector<std::string> rows;
  for (Site s : all_sites()) rows.push_back(site_name(s));
  for (const IterationRecord* r : recs)
    for (const auto& [name, n] : r->*field)
      if (std::find(rows.begin(), rows.end(), name) == rows.end()) rows.push_back(name);
  return rows;
}

// Host reads (or operators dispatched) per site per iteration for one rank, as a table (rows: sites with any;
// columns: iterations).
void print_sync_table(const Trace& t, int rank, const std::string& arm, const std::string& fixture,
                      PerSite field = &IterationRecord::reads_per_site, const char* what = "host reads") {
  std::vector<const IterationRecord*> recs;
  for (int64_t it : t.iterations())
    if (const IterationRecord* r = t.find(it, rank)) recs.push_back(r);
  if (recs.empty()) return;
  std::printf("%s per site per iteration: arm %s, fixture %s, rank %d\n", what, arm.c_str(), fixture.c_str(), rank);
  const size_t shown = std::min<size_t>(recs.size(), 12);
  std::string head = fmt::format("{:<18}", "site");
  for (size_t i = 0; i < shown; ++i) head += fmt::format(" {:>5}", recs[i]->iteration);
  head += fmt::format(" {:>7} {:>8}", "total", "per-iter");
  std::printf("%s\n", head.c_str());
  std::vector<int64_t> col_total(shown, 0);
  int64_t grand = 0;
  for (const std::string& name : table_rows(recs, field)) {
    int64_t total = 0;
    for (const IterationRecord* r : recs) {
      auto it = (r->*field).find(name);
      total += it == (r->*field).end() ? 0 : it->second;
    }
    if (total == 0) continue;
    std::string row = fmt::format("{:<18}", name.substr(0, 18));
    for (size_t i = 0; i < shown; ++i) {
      auto it = (recs[i]->*field).find(name);
      int64_t v = it == (recs[i]->*field).end() ? 0 : it->second;
      col_total[i] += v;
      row += fmt::format(" {:>5}", v);
    }
    grand += total;
    row += fmt::format(" {:>7} {:>8.2f}", total, static_cast<double>(total) / static_cast<double>(recs.size()));
    std::printf("%s\n", row.c_str());
  }
  std::string foot = fmt::format("{:<18}", "total");
  for (size_t i = 0; i < shown; ++i) foot += fmt::format(" {:>5}", col_total[i]);
  foot += fmt::format(" {:>7} {:>8.2f}", grand, static_cast<double>(grand) / static_cast<double>(recs.size()));
  std::printf("%s\n", foot.c_str());
}

// Rank 0's host reads per site per iteration in the CUPTI counter's table format (trainer/measure/sync_table_file.h), so
// `loopgate syncs --diff` and `loopgate pair` read a CPU run's ledger as they read a GPU run's counter.
nlohmann::json syncs_table(const Trace& t, int rank) {
  sync_file::ProcessTable out;
  out.pid = static_cast<int64_t>(getpid());
  out.region = "every iteration";
  out.python = "none (loopgate run)";
  std::map<std::string, sync_file::SiteRow> per_site;
  for (int64_t it : t.iterations()) {
    const IterationRecord* r = t.find(it, rank);
    if (!r) continue;
    out.iterations.push_back(it);
    for (const auto& [site, n] : r->reads_per_site)
      if (n > 0) per_site[site].per_iteration[it] = n;
  }
  out.iterations_seen = static_cast<int64_t>(out.iterations.size());
  for (auto& [site, row] : per_site) {
    row.site = site;
    row.kind = "ledger host read";
    out.sites.push_back(std::move(row));
  }
  return sync_file::to_json(out);
}

// The resolved run, as Megatron prints its arguments before training (`loopgate pair` compares the blocks).
std::map<std::string, std::string> run_arguments(const RunOptions& o, int world) {
  const RunConfig& c = o.config;
  auto b = [](bool v) { return std::string(v ? "True" : "False"); };
  auto num = [](double v) { return fmt::format("{}", v); };
  return {{"arm", o.arm},
          {"fixture", c.fixture},
          {"world_size", std::to_string(world)},
          {"tensor_model_parallel_size", std::to_string(c.layout.tp)},
          {"pipeline_model_parallel_size", std::to_string(c.layout.pp)},
          {"sequence_parallel", b(c.layout.sequence_parallel)},
          {"micro_batch_size", std::to_string(c.data.micro_batch)},
          {"global_batch_size", std::to_string(c.data.global_batch)},
          {"seq_length", std::to_string(c.model.seq)},
          {"hidden_size", std::to_string(c.model.hidden)},
          {"num_layers", std::to_string(c.model.layers)},
          {"num_attention_heads", std::to_string(c.model.heads)},
          {"ffn_hidden_size", std::to_string(c.model.ffn_size())},
          {"vocab_size", std::to_string(c.model.vocab)},
          {"seed", std::to_string(c.model.init_seed)},
          {"data_seed", std::to_string(c.data.data_seed)},
          {"params_dtype", std::string(c10::toString(c.model.dtype))},
          {"train_iters", std::to_string(c.train_iters)},
          {"log_interval", std::to_string(c.log_interval)},
          {"lr", num(c.schedule.lr)},
          {"min_lr", num(c.schedule.min_lr)},
          {"lr_decay_style", to_string(c.schedule.lr_decay_style)},
          {"lr_warmup_iters", std::to_string(c.schedule.lr_warmup_iters)},
          {"clip_grad", num(c.optim.clip_grad)},
          {"weight_decay", num(c.weight_decay)},
          {"loss_scale", c.loss_scale > 0 ? num(c.loss_scale) : "None"},
          {"dynamic_loss_scale", b(c.dynamic_loss_scale)},
          {"rerun_mode", rerun_mode_name(c.rerun.mode)},
          {"check_for_nan_in_loss_and_grad", b(c.rerun.check_for_nan_in_loss_and_grad)},
          {"on_fault", fault_outcome_name(c.rerun.on_fault)},
          {"inject", o.flags.inject.value_or("None")},
          {"exit_duration_in_mins", c.exit_duration_in_mins > 0 ? num(c.exit_duration_in_mins) : "None"},
          {"check_collectives", b(c.check_collectives)},
          {"digests", b(c.digests)}};
}

}  // namespace

// MPI for a CLI process that is one rank of a job: one intra-op thread per rank, the rank known to errors.
void cli_mpi_init(int* rank, int* size) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  world_rank_for_errors() = *rank;
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
}

int cmd_run(const RunOptions& o) {
  int rank = 0, size = 1;
  cli_mpi_init(&rank, &size);

  // Validation that every rank does identically, before any collective; then one all-reduce so that ranks that
  // could disagree (an output path seen differently on two hosts) still exit together: the lowest rank that
  // found a problem prints it, one line, and every rank exits 2.
  std::string problem;
  try {
    validate_run_options(o, size);
    LG_INPUT_CHECK(!o.config.cuda_graph_iteration || find_arm(o.arm).on_device,
                   "--cuda-graph iteration with --arm {}: it reads between log points, so no iteration can be "
                   "captured (only an arm that reads nothing between log points can: zerosync)", o.arm);
    // Each rank reads its own file of the checkpoint now (read again at the load): a bad file or one saved with
    // another model or layout is refused here, one line, before any work.
    if (!o.config.load_dir.empty())
      check_checkpoint_args(o.config.load_dir, load_checkpoint(o.config.load_dir, rank, size), o.config, size);
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
    RunConfig config = o.config;
    config.param_checksums = !o.trace_path.empty();  // only a Trace needs them (a copy of every param on a GPU)
    config.count_launches = o.syncs || !o.trace_path.empty();
    // Megatron's print_rank_last: the last rank prints each line at its log point, stamped with the wall clock of
    // that moment (the seed measured step time between these stamps), and flushes it.
    if (!o.quiet)
      config.print_log_line = [](const std::string& line) {
        std::printf(" [%s]%s\n", timestamp().c_str(), line.c_str());
        std::fflush(stdout);
      };
    if (!o.quiet && rank == 0) {
      std::fputs(format_arguments_block(run_arguments(o, size)).c_str(), stdout);
      std::fflush(stdout);
    }
    cupti_start_if_asked(rank);
    profile_start_if_asked(rank);
    RunResult r = run_arm(config, o.arm, MPI_COMM_WORLD);
    cupti_stop();
    profile_stop();
    Trace t = gather_trace(r, MPI_COMM_WORLD);
    if (rank == 0 && !o.trace_path.empty()) write_trace(t, o.trace_path);
    if (rank == 0 && !o.syncs_json.empty()) {
      std::ofstream f(o.syncs_json);
      f << syncs_table(t, 0).dump(1) << "\n";
      LG_INPUT_CHECK(f.good(), "--syncs-json {}: writing failed", o.syncs_json);
    }
    if (rank == 0 && o.syncs) {
      print_sync_table(t, 0, o.arm, o.config.fixture);
      if (size > 1) print_sync_table(t, size - 1, o.arm, o.config.fixture);
      const PerSite ops = &IterationRecord::launches_per_site;
      const char* what = "operators dispatched (CPU launch proxy)";
      print_sync_table(t, 0, o.arm, o.config.fixture, ops, what);
      if (size > 1) print_sync_table(t, size - 1, o.arm, o.config.fixture, ops, what);
      cupti_print(t, 0);
    }
    if (rank == 0) profile_print(0);
    if (o.config.capture.enabled()) std::printf("[rank %d] %s\n", rank, describe(r.capture).c_str());
    if (o.config.cuda_graph_iteration)
      std::printf("[rank %d] --cuda-graph iteration: captured at iteration %lld, %lld replay(s)%s%s\n", rank,
                  static_cast<long long>(r.graph.captured_at), static_cast<long long>(r.graph.replays),
                  r.graph.error.empty() ? "" : "; ", r.graph.error.c_str());
    if (r.exit_code != 0 && rank == size - 1)
      std::fprintf(stderr, "loopgate: fault confirmed by the rerun state machine; exiting with code %d%s\n", r.exit_code,
                   r.iterations_past_fault > 0
                       ? fmt::format(" (reported at the log point, {} iteration(s) after the fault; every step since masked)",
                                     r.iterations_past_fault).c_str()
                       : "");
    if (r.exited_on_duration && rank == size - 1)
      std::printf("exiting program after --exit-duration-in-mins %.3f at iteration %lld\n",
                  o.config.exit_duration_in_mins, static_cast<long long>(r.iterations_done));
    code = r.exit_code;
  } catch (const InputError& e) {
    std::fprintf(stderr, "loopgate: error: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loopgate: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::fflush(stdout);
  MPI_Finalize();
  return code;
}

}  // namespace loopgate
