// `loopgate syncs` (syncs.h). The counting is the injection library's (tools/cupti/sync_inject.cpp); this file
// sets up its environment, runs the command, and reads back the per-process JSON it wrote.
#include "tools/loopgate/syncs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>

#include "tools/loopgate/paths.h"
#include "tools/loopgate/process.h"
#include "trainer/measure/sync_table_file.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace fs = std::filesystem;
namespace {


// A per-process table, or a merged one ({"processes": [...]}): the per-process tables.
// Each site row is checked here, once, so a hand-edited or truncated table is a one-line input error.
std::vector<nlohmann::json> processes_of(const nlohmann::json& j, const std::string& name) {
  std::vector<nlohmann::json> procs;
  if (j.is_object() && j.contains("processes") && j["processes"].is_array())
    procs.assign(j["processes"].begin(), j["processes"].end());
  else
    LG_INPUT_CHECK(j.is_object() && j.value("format", "") == sync_file::kFormat,
                   "{}: not a loopgate syncs table (no \"format\": \"{}\" or \"processes\")", name, sync_file::kFormat);
  if (procs.empty()) procs.push_back(j);
  for (const nlohmann::json& p : procs) {
    const std::string problem = sync_file::table_problem(p);
    LG_INPUT_CHECK(problem.empty(), "{}: {}", name, problem);
  }
  return procs;
}

int64_t iterations_of(const nlohmann::json& p) {
  const int64_t seen = p.value("iterations_seen", int64_t{0});
  const int64_t listed = p.contains("iterations") ? static_cast<int64_t>(p["iterations"].size()) : 0;
  return std::max<int64_t>(1, seen > 0 ? seen : listed);
}

std::vector<std::string> table_files(const std::string& dir) {
  std::vector<std::string> out;
  static const std::regex name(R"(syncs\.\d+\.json)");
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (std::regex_match(e.path().filename().string(), name)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}


std::string print_process(const nlohmann::json& p) {
  std::vector<std::string> its;
  for (const auto& it : p["iterations"]) its.push_back(std::to_string(it.get<int64_t>()));
  const size_t shown = std::min<size_t>(its.size(), 10);
  size_t w = 24;
  for (const auto& s : p["sites"]) w = std::max(w, s["site"].get<std::string>().size());
  std::string out = fmt::format("pid {}: region {}, {} iteration(s) seen, Python sites {}\n", p.value("pid", 0),
                                p.value("region", "?"), p.value("iterations_seen", int64_t{0}), p.value("python", "?"));
  out += fmt::format("{:<{}} {:<36}", "site", w, "kind");
  for (size_t i = 0; i < shown; ++i) out += fmt::format(" {:>4}", its[i]);
  out += fmt::format(" {:>7} {:>8}\n", "total", "per-iter");
  int64_t total = 0;
  std::vector<int64_t> col(shown, 0);
  const double n = static_cast<double>(iterations_of(p));
  for (const auto& s : p["sites"]) {
    int64_t t = 0;
    std::string cells;
    for (size_t i = 0; i < its.size(); ++i) {
      const int64_t c = s["per_iteration"].value(its[i], int64_t{0});
      t += c;
      if (i < shown) {
        col[i] += c;
        cells += fmt::format(" {:>4}", c);
      }
    }
    total += t;
    out += fmt::format("{:<{}} {:<36}{} {:>7} {:>8.2f}\n", s["site"].get<std::string>(), w, s["kind"].get<std::string>(),
                       cells, t, static_cast<double>(t) / n);
  }
  out += fmt::format("{:<{}} {:<36}", "total", w, "");
  for (int64_t c : col) out += fmt::format(" {:>4}", c);
  out += fmt::format(" {:>7} {:>8.2f}\n", total, static_cast<double>(total) / n);
  return out;
}

void check_syncs_options(const SyncsOptions& o) {
  LG_INPUT_CHECK(std::isfinite(o.overhead_limit) && o.overhead_limit > 0, "--overhead-limit {}: must be > 0 percent",
                 o.overhead_limit);
  if (!o.table.empty()) {
    LG_INPUT_CHECK(o.command.empty() && o.diff.empty(), "--table {}: a saved table is read alone (no command, no --diff)",
                   o.table);
    check_input_file("--table", o.table);
    return;
  }
  if (!o.diff.empty()) {
    LG_INPUT_CHECK(!o.overhead_ab, "--overhead-ab: it measures a run, --diff compares two tables");
    LG_INPUT_CHECK(o.diff.size() == 2, "--diff: two tables, A.json B.json ({} given)", o.diff.size());
    LG_INPUT_CHECK(o.command.empty(), "--diff: no command ('{}' given): it compares two tables", o.command.front());
    for (const std::string& p : o.diff) check_input_file("--diff", p);
    return;
  }
  LG_INPUT_CHECK(!o.command.empty(), "syncs: no command: loopgate syncs [flags] -- CMD... (or --diff A.json B.json)");
  check_launcher("syncs", o.command.front());
  static const std::regex range(R"((\d{1,9})-(\d{1,9}))");
  std::smatch m;
  LG_INPUT_CHECK(o.iters.empty() || (std::regex_match(o.iters, m, range) && std::stoll(m[1]) >= 1 &&
                                     std::stoll(m[2]) >= std::stoll(m[1])),
                 "--iters '{}': expected A-B with 1 <= A <= B", o.iters);
  static const std::regex target(R"([A-Za-z_][\w.]*:[A-Za-z_]\w*)");
  LG_INPUT_CHECK(std::regex_match(o.iter_fn, target), "--iter-fn '{}': expected module:function", o.iter_fn);
  check_input_file("--inject-lib", o.inject_lib);
  check_output_dir("--out-dir", o.out_dir);
  if (!o.json_path.empty()) check_output_file("--json", o.json_path);
  if (!o.csv_path.empty()) check_output_file("--csv", o.csv_path);
}

}  // namespace

nlohmann::json read_json_file(const std::string& flag, const std::string& path) {
  check_input_file(flag, path);
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  LG_INPUT_CHECK(!j.is_discarded(), "{} {}: not JSON", flag, path);
  return j;
}

// Each counted iteration minus the mean of its uncounted neighbours (syncs.h: OverheadAb).
std::vector<double> paired_differences(const std::vector<double>& ms, const std::vector<bool>& counted) {
  std::vector<double> d;
  for (size_t i = 1; i + 1 < ms.size() && i + 1 < counted.size(); ++i)
    if (counted[i] && !counted[i - 1] && !counted[i + 1]) d.push_back(ms[i] - (ms[i - 1] + ms[i + 1]) / 2);
  return d;
}

std::optional<OverheadAb> overhead_ab(const nlohmann::json& process, double limit_pct) {
  const nlohmann::json& ab = process.value("overhead_ab", nlohmann::json());
  if (!ab.is_object()) return std::nullopt;
  const auto counted = ab.value("counted_ms", std::vector<double>{});
  const auto uncounted = ab.value("uncounted_ms", std::vector<double>{});
  const std::vector<double> d =
      paired_differences(ab.value("iteration_ms", std::vector<double>{}), ab.value("iteration_counted", std::vector<bool>{}));
  if (d.size() < 10 || counted.size() < 2 || uncounted.size() < 2) return std::nullopt;
  OverheadAb out;
  out.stats = ab_statistics(uncounted, counted, 0.05);
  out.pairs = static_cast<int64_t>(d.size());
  const PairedShift shift = paired_shift(d, 0.05);
  out.location_ms = shift.location;
  out.low_ms = shift.ci_low;
  out.high_ms = shift.ci_high;
  out.mean_ms = shift.mean;
  const double base = out.stats.median_a;
  out.low_pct = 100.0 * out.low_ms / base;
  out.high_pct = 100.0 * out.high_ms / base;
  out.verdict = out.high_pct <= limit_pct ? "within" : out.low_pct > limit_pct ? "over" : "undecided";
  out.sentence = fmt::format(
      "counter overhead, alternating iterations of pid {}: uncounted median {:.2f} ms ({} iterations), counted {:.2f} "
      "ms ({}); each counted iteration against its uncounted neighbours ({} pairs): {:+.2f} ms (Hodges-Lehmann; mean "
      "{:+.2f} ms), 95 % interval {:+.2f} to {:+.2f} ms (signed-rank; {:+.2f} % to {:+.2f} % of the uncounted median): "
      "{} {} %",
      process.value("pid", 0), base, uncounted.size(), out.stats.median_b, counted.size(), out.pairs, out.location_ms,
      out.mean_ms, out.low_ms, out.high_ms, out.low_pct, out.high_pct,
      out.verdict == "undecided" ? "neither within nor over" : out.verdict, limit_pct);
  return out;
}

std::string default_inject_lib(const std::string& self) {
  return fs::path(self).parent_path().string() + "/cupti/libloopgate_sync_inject.so";
}

std::vector<std::pair<std::string, std::string>> counter_environment(const SyncsOptions& o, const std::string& dir) {
  const std::string shim = fs::path(o.inject_lib).parent_path().string() + "/loopgate_pyshim";
  const std::string lib = fs::absolute(o.inject_lib).string();
  std::vector<std::pair<std::string, std::string>> env = {
      {sync_file::kEnvInjection, lib},          {sync_file::kEnvShimLib, lib},
      {sync_file::kEnvShimIterFn, o.iter_fn},   {sync_file::kEnvJson, dir + "/syncs.%p.json"},
      {sync_file::kEnvText, dir + "/syncs.%p.txt"}};
  if (!o.iters.empty()) env.emplace_back(sync_file::kEnvRoi, "iters:" + o.iters);
  if (o.launches) env.emplace_back(sync_file::kEnvLaunches, "1");
  if (o.overhead_ab) env.emplace_back(sync_file::kEnvOverheadAb, "1");
  env.emplace_back(sync_file::kEnvNvtx, o.nvtx ? "1" : "0");
  const char* pythonpath = std::getenv("PYTHONPATH");
  env.emplace_back("PYTHONPATH",
                   fs::absolute(shim).string() + (pythonpath && *pythonpath ? std::string(":") + pythonpath : ""));
  return env;
}

std::vector<nlohmann::json> read_sync_tables(const std::string& dir) {
  std::vector<nlohmann::json> out;
  for (const std::string& f : table_files(dir)) out.push_back(read_json_file("table", f));
  return out;
}

std::vector<SyncSiteRow> sync_site_rows(const nlohmann::json& table, const std::string& name) {
  std::map<std::pair<std::string, std::string>, SyncSiteRow> rows;
  const std::vector<nlohmann::json> procs = processes_of(table, name);
  for (const nlohmann::json& p : procs) {
    LG_INPUT_CHECK(p.contains("sites") && p["sites"].is_array(), "{}: a process table without \"sites\"", name);
    const double n = static_cast<double>(iterations_of(p));
    for (const auto& s : p["sites"]) {
      SyncSiteRow& r = rows[{s.value("site", "?"), s.value("kind", "?")}];
      r.site = s.value("site", "?");
      r.kind = s.value("kind", "?");
      int64_t t = 0;
      for (const auto& [it, c] : s["per_iteration"].items()) t += c.get<int64_t>();
      r.total += t;
      r.per_iteration += static_cast<double>(t) / n / static_cast<double>(procs.size());
    }
  }
  std::vector<SyncSiteRow> out;
  for (auto& [key, r] : rows) out.push_back(std::move(r));
  return out;
}

std::string format_sync_diff(const std::vector<SyncSiteRow>& a, const std::vector<SyncSiteRow>& b,
                             const std::string& name_a, const std::string& name_b) {
  struct Pair {
    std::string site, kind;
    double a = 0, b = 0;
  };
  std::map<std::pair<std::string, std::string>, Pair> rows;
  for (const SyncSiteRow& r : a) rows[{r.site, r.kind}] = {r.site, r.kind, r.per_iteration, 0};
  for (const SyncSiteRow& r : b) {
    Pair& p = rows[{r.site, r.kind}];
    p.site = r.site;
    p.kind = r.kind;
    p.b = r.per_iteration;
  }
  std::vector<Pair> v;
  for (auto& [k, p] : rows) v.push_back(p);
  std::stable_sort(v.begin(), v.end(), [](const Pair& x, const Pair& y) {
    return std::fabs(x.b - x.a) > std::fabs(y.b - y.a);
  });
  size_t w = 24;
  for (const Pair& p : v) w = std::max(w, p.site.size());
  std::string out = fmt::format("host syncs per iteration per site: A = {}, B = {} (mean over processes)\n", name_a, name_b);
  out += fmt::format("{:<{}} {:<36} {:>9} {:>9} {:>9}\n", "site", w, "kind", "A", "B", "B - A");
  double ta = 0, tb = 0;
  for (const Pair& p : v) {
    ta += p.a;
    tb += p.b;
    out += fmt::format("{:<{}} {:<36} {:>9.2f} {:>9.2f} {:>+9.2f}\n", p.site, w, p.kind, p.a, p.b, p.b - p.a);
  }
  out += fmt::format("{:<{}} {:<36} {:>9.2f} {:>9.2f} {:>+9.2f}\n", "total", w, "", ta, tb, tb - ta);
  return out;
}

CLI::App* add_syncs_command(CLI::App& app, SyncsOptions& o) {
  CLI::App* c = app.add_subcommand("syncs", "count host syncs per iteration per Python site of a CUDA program: "
                                            "loopgate syncs [flags] -- CMD... (or --diff A.json B.json)");
  c->add_option("command", o.command, "the program and its arguments, after --");
  c->add_option("--iter-fn", o.iter_fn, "module:function whose every call begins an iteration (default "
                                        "megatron.training.training:train_step)");
  c->add_option("--iters", o.iters, "A-B: count marked iterations A to B only, 1 <= A <= B (default: every one)");
  c->add_option("--out-dir", o.out_dir, "folder for each process's table, syncs.PID.json and .txt (default "
                                        "loopgate-syncs)");
  c->add_option("--json", o.json_path, "write the merged table (every process) as JSON");
  c->add_option("--csv", o.csv_path, "write one CSV row per process, site, kind and iteration");
  c->add_option("--diff", o.diff, "two tables (a process's or a merged one): per site, A -> B per iteration")
      ->expected(2);
  c->add_option("--table", o.table, "print a saved table (a process's syncs.PID.json or a merged --json) instead of "
                                    "running a command; with --overhead-ab, its overhead verdict");
  c->add_option("--inject-lib", o.inject_lib, "the injection library (default: the one built beside this loopgate)");
  c->add_flag("--launches", o.launches, "count kernel and graph launches too (a callback per launch)");
  c->add_flag("--nvtx", o.nvtx, "NVTX ranges as fallback sites (a callback per NVTX call; default off)");
  c->add_flag("--overhead-ab", o.overhead_ab,
              "the counter's overhead as an A/B inside the run: the region's marked iterations alternate counted and "
              "uncounted (callbacks off); the table holds the counted ones");
  c->add_option("--overhead-limit", o.overhead_limit, "with --overhead-ab: the verdict's limit, percent of the "
                                                      "uncounted iterations' median, > 0 (default 3)");
  return c;
}

int cmd_syncs(const SyncsOptions& opts) {
  SyncsOptions o = opts;
  if (o.inject_lib.empty()) o.inject_lib = default_inject_lib(o.self_exe);
  check_syncs_options(o);
  if (stop_after_validation()) return 0;
  if (!o.diff.empty()) {
    const std::vector<SyncSiteRow> a = sync_site_rows(read_json_file("--diff", o.diff[0]), o.diff[0]);
    const std::vector<SyncSiteRow> b = sync_site_rows(read_json_file("--diff", o.diff[1]), o.diff[1]);
    std::fputs(format_sync_diff(a, b, o.diff[0], o.diff[1]).c_str(), stdout);
    return 0;
  }
  int rc = 0;
  nlohmann::json merged = {{"format", sync_file::kMergedFormat}, {"processes", nlohmann::json::array()}};
  if (!o.table.empty()) {
    for (nlohmann::json& t : processes_of(read_json_file("--table", o.table), o.table))
      merged["processes"].push_back(std::move(t));
    merged["command"] = {"(saved table " + o.table + ")"};
  } else {
    const std::string shim = fs::path(o.inject_lib).parent_path().string() + "/loopgate_pyshim";
    check_input_file("--inject-lib (its Python shim)", shim + "/sitecustomize.py");
    fs::create_directories(o.out_dir);
    for (const std::string& stale : table_files(o.out_dir)) fs::remove(stale);
    ProcessSpec program;
    program.argv = o.command;
    program.env = counter_environment(o, fs::absolute(o.out_dir).string());
    rc = run_process(program);
    merged["command"] = o.command;
    for (nlohmann::json& t : read_sync_tables(o.out_dir)) merged["processes"].push_back(std::move(t));
  }
  merged["exit_code"] = rc;
  if (merged["processes"].empty()) {
    std::fprintf(stderr, "loopgate syncs: no process counted a host sync (the library loads at cuInit: is '%s' a CUDA "
                         "program, and did the region open?)\n",
                 merged["command"].front().get<std::string>().c_str());
    return rc != 0 ? rc : 1;
  }
  std::printf("loopgate syncs: %s (exit %d), iterations marked by %s%s\n",
              merged["command"].front().get<std::string>().c_str(), rc,
              o.iter_fn.c_str(), o.iters.empty() ? "" : (", counted " + o.iters).c_str());
  for (const nlohmann::json& p : merged["processes"]) std::fputs(print_process(p).c_str(), stdout);
  if (o.overhead_ab) {
    merged["overhead"] = nlohmann::json::array();
    for (const nlohmann::json& p : merged["processes"]) {
      const std::optional<OverheadAb> ab = overhead_ab(p, o.overhead_limit);
      if (!ab) continue;
      std::printf("%s\n", ab->sentence.c_str());
      merged["overhead"].push_back({{"pid", p.value("pid", 0)}, {"verdict", ab->verdict}, {"limit_pct", o.overhead_limit},
                                    {"pairs", ab->pairs}, {"location_ms", ab->location_ms}, {"mean_ms", ab->mean_ms},
                                    {"low_pct", ab->low_pct},
                                    {"high_pct", ab->high_pct}, {"ratio", ab->stats.ratio}, {"sentence", ab->sentence}});
    }
    if (merged["overhead"].empty())
      std::printf("counter overhead: no process marked 10 or more counted iterations between uncounted ones "
                  "(--overhead-ab)\n");
  }
  if (!o.json_path.empty()) std::ofstream(o.json_path) << merged.dump(1) << "\n";
  if (!o.csv_path.empty()) {
    std::ofstream csv(o.csv_path);
    csv << "pid,site,kind,iteration,syncs\n";
    for (const nlohmann::json& p : merged["processes"])
      for (const auto& s : p["sites"])
        for (const auto& [it, c] : s["per_iteration"].items())
          csv << p.value("pid", 0) << ",\"" << s.value("site", "") << "\",\"" << s.value("kind", "") << "\"," << it
              << "," << c.get<int64_t>() << "\n";
  }
  return rc;
}

}  // namespace loopgate
