// loopgate: the command line of the loop-change gate.
//   mpirun -np N loopgate run --fixture F --arm A [...]   one arm on one fixture: Megatron log lines, sync table, Trace
//   loopgate gate [--fixture F ...] [--arm A ...]          every gate on every CPU fixture: verdict table, exit 0/1/2
//   loopgate golden --check | --update                    compare with / rewrite golden/ (the only writer)
//   loopgate ab A B                                        step time of two runs' files: medians, shift, Mann-Whitney
//   loopgate compare --a A1 [A2..] --b B1 [B2..]           did the change keep the numbers (Megatron logs, Traces)
//   loopgate report --gate gate.json [--out report.html]  one self-contained HTML page from a gate run
//   loopgate syncs [flags] -- CMD...                       host syncs per iteration per Python site of a CUDA program
//   loopgate pair --baseline CMD --candidate CMD           the gate for two real commands: alternating runs, rows
// Flags keep Megatron's names where Megatron has the flag. Bad input: one line on stderr, exit 2, before any work
// (run_flags.h, validate.h, paths.h; docs/cli.md). `loopgate cli-reference` prints every flag as Markdown.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <utility>
#include <vector>

#include "fixtures/defects/catalogue.h"
#include "fixtures/fixtures.h"
#include "fixtures/golden.h"
#include "fixtures/loop_checks.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/each_row.h"
#include "tools/loopgate/run_flags.h"
#include "tools/loopgate/gpu.h"
#include "tools/loopgate/report.h"
#include "tools/loopgate/pair.h"
#include "tools/loopgate/syncs.h"
#include "trainer/common/error.h"

namespace loopgate {

int input_error(const std::string& what) {
  if (is_rank_zero_env()) std::fprintf(stderr, "loopgate: error: %s\n", what.c_str());
  return 2;
}

namespace {

std::string self_path(const char* argv0) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  buf[n] = '\0';
  return buf;
}

// An option given an empty value (--trace '', --iters "") reads as "not given" and would be dropped silently.
void check_no_empty_values(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* opt : sub->get_options())
      for (const std::string& v : opt->results())
        LG_INPUT_CHECK(!v.empty(), "{} '': needs a value", opt->get_name());
}

// `loopgate cli-reference`: every subcommand's options as Markdown tables, from these CLI11 definitions
// (docs/cli.md embeds the output; CTest cli_reference_in_docs keeps them in step).
void print_cli_reference(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    std::printf("### loopgate %s\n\n%s\n\n| option | value | meaning and range |\n|---|---|---|\n",
                sub->get_name().c_str(), sub->get_description().c_str());
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->get_group().empty() || opt->get_name() == "--help") continue;  // hidden (internal) options
      std::string names;
      for (const std::string& n : opt->get_lnames()) names += (names.empty() ? "`--" : ", `--") + n + "`";
      for (const std::string& n : opt->get_snames()) names += (names.empty() ? "`-" : ", `-") + n + "`";
      if (names.empty()) names = "`" + opt->get_name() + "` (positional)";
      std::string value = opt->get_expected_min() == 0 ? "flag" : opt->get_type_name();
      if (opt->get_expected_max() > 1) value += " ...";
      std::string desc;
      for (char ch : opt->get_description()) desc += ch == '|' ? std::string("\\|") : std::string(1, ch);
      if (opt->get_required()) desc += " (required)";
      std::printf("| %s | %s | %s |\n", names.c_str(), value.c_str(), desc.c_str());
    }
    std::printf("\n");
  }
}

int cli_main(int argc, char** argv) {
  register_planted_defects();  // `--arm defect-...` and the selftest find them
  CLI::App app{"loopgate: the acceptance gate for distributed training-loop changes"};
  app.require_subcommand(1);
  const std::string self = self_path(argv[0]);
  const std::string bin = self.substr(0, self.rfind('/'));
  RunFlags rf;
  GateOptions go;
  GoldenOptions gd;
  AbCommand ab;
  CompareOptions cmp;
  ReportOptions ro;
  SyncsOptions sy;
  PairOptions pr;
  SelftestOptions so;
  // Each subcommand and what runs it, in --help's order (a braced list runs left to right).
  const std::vector<std::pair<CLI::App*, std::function<int()>>> commands = {
      {add_run_command(app, rf), [&] { return cmd_run(to_run_options(rf)); }},
      {add_gate_command(app, go),
       [&] {
         if (go.suites_exe.empty()) go.suites_exe = bin + "/../suites/loopgate_gates";
         if (go.gpu_loop_exe.empty())
           go.gpu_loop_exe = go.suites_exe.substr(0, go.suites_exe.rfind('/') + 1) + "gpu/loopgate_gpu_loop";
         return cmd_gate(go);
       }},
      {add_golden_command(app, gd), [&] { gd.self_exe = self; return cmd_golden(gd); }},
      {add_ab_command(app, ab), [&] { return cmd_ab_command(ab); }},
      {add_compare_command(app, cmp), [&] { return cmd_compare(cmp); }},
      {add_report_command(app, ro), [&] { return cmd_report(ro); }},
      {add_syncs_command(app, sy), [&] { sy.self_exe = self; return cmd_syncs(sy); }},
      {add_pair_command(app, pr), [&] { pr.self_exe = self; return cmd_pair(pr); }},
      {app.add_subcommand("cli-reference", "print every subcommand's options as Markdown")->group(""),
       [&] { print_cli_reference(app); return 0; }},
      {add_selftest_command(app, so),
       [&] {
         so.suites_exe = bin + "/../suites/loopgate_gates";
         so.gpu_loop_exe = bin + "/../suites/gpu/loopgate_gpu_loop";
         so.unit_exe = bin + "/../suites/loopgate_unit";
         so.self_exe = self;
         so.source_dir = std::filesystem::path(trainer_source_dir()).parent_path().string();
         return cmd_selftest(so);
       }},
  };

  // CLI11 reads an unknown first word as a stray positional ("A subcommand is required"): name it instead.
  std::string known;
  bool first_known = false;
  const std::string first = argc < 2 ? "" : argv[1];
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    first_known = first_known || sub->get_name() == first;
    if (!sub->get_group().empty()) known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  if (argc < 2) return input_error("a subcommand is required: " + known + " (loopgate --help)");
  if (first.empty() || (first[0] != '-' && !first_known))
    return input_error(fmt::format("unknown subcommand '{}' (known: {})", first, known));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    return input_error(msg.empty() ? "bad arguments (see --help)" : msg);
  }
  try {
    check_no_empty_values(app);
    for (const auto& [command, run] : commands)
      if (*command) return run();
  } catch (const InputError& e) {
    return input_error(e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loopgate: rank %d: %s\n", world_rank_for_errors(), e.what());
    return 1;
  }
  return 2;
}

}  // namespace
}  // namespace loopgate

int main(int argc, char** argv) {
  // Before anything runs: each row then starts from this process as it was loaded (each_row.h).
  if (argc >= 2 && std::string(argv[1]) == loopgate::kEachRowFlag) {
    if (argc != 3)
      return loopgate::input_error(fmt::format("{}: needs exactly one FILE (a JSON array of rows), got {}",
                                               loopgate::kEachRowFlag, argc - 2));
    return loopgate::each_row(argv[2], loopgate::cli_main);
  }
  return loopgate::cli_main(argc, argv);
}
