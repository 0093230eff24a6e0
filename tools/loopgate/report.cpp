// `loopgate report` (report.h): the gate's verdict table, its failures, and per fixture the clean scenario's
// Traces drawn as inline SVG — loss / norms / LR per iteration, host reads per site, timer intervals. Every number
// on the page is read from the gate JSON or a Trace; every text is escaped. Sections, top to bottom: header,
// verdict table, failures, one block per fixture. Docs: docs/report.md.
#include "tools/loopgate/validate.h"
#include "tools/loopgate/report.h"
#include "tools/loopgate/paths.h"

#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tools/loopgate/svg.h"
#include "trainer/common/error.h"
#include "trainer/loop/trace.h"

namespace loopgate {
namespace {

namespace fs = std::filesystem;
using Attrs = std::map<std::string, std::string>;

// The scenario every gate shares (fixtures/scenarios.cpp clean_run): the fixture's config, log interval 1.
const char* const kCleanScenario = "clean";
const size_t kMessageLines = 14;  // lines of a failure message shown

struct ArmTrace {
  std::string arm;
  Trace trace;
};

// ---- inputs ----

// Every arm's clean-scenario Trace of fixture `r`, in `order` (baseline, candidates, then the rest).
std::vector<ArmTrace> clean_traces(const FixtureRun& r, const std::vector<std::string>& order, const fs::path& base) {
  std::vector<ArmTrace> out;
  for (const std::string& arm : order)
    for (const TraceFile& t : r.traces)
      if (t.scenario == kCleanScenario && t.arm == arm) {
        const fs::path p = fs::path(t.path).is_absolute() ? fs::path(t.path) : base / t.path;
        out.push_back({arm, read_trace(p.string())});
      }
  return out;
}

// baseline first, then the candidate arms as the gate listed them, then every other arm with a clean Trace
// (planted defects), sorted: one colour per arm across the whole page.
std::vector<std::string> arm_order(const GateSummary& g) {
  std::vector<std::string> order = {"baseline"};
  for (const std::string& a : g.arms)
    if (std::find(order.begin(), order.end(), a) == order.end()) order.push_back(a);
  std::set<std::string> rest;
  for (const FixtureRun& r : g.runs)
    for (const TraceFile& t : r.traces)
      if (t.scenario == kCleanScenario && std::find(order.begin(), order.end(), t.arm) == order.end()) rest.insert(t.arm);
  order.insert(order.end(), rest.begin(), rest.end());
  return order;
}

std::string arm_color(const std::vector<std::string>& order, const std::string& arm) {
  return palette_color(static_cast<size_t>(std::find(order.begin(), order.end(), arm) - order.begin()));
}

std::string value_label(double v) { return fmt::format("{} ({:.9g})", hex(v), v); }

// ---- page frame ----

const char* const kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; max-width: 1500px; }
h1 { font-size: 22px; margin: 0 0 8px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 18px 0 6px; }
table { border-collapse: collapse; margin: 6px 0 12px; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 2px 10px; border-radius: 4px; font-weight: 600; color: #fff; }
.badge.ok { background: #2e7d32; } .badge.failed { background: #c62828; }
td.pass { background: #e8f5e9; } td.fail, td.accepted { background: #ffebee; color: #b71c1c; font-weight: 600; }
td.rejected { background: #e3f2fd; } td.none { color: #999; }
pre { background: #fafafa; border: 1px solid #eee; padding: 8px; overflow-x: auto; font-size: 12px; }
.caption { color: #555; font-size: 13px; max-width: 1000px; } .charts { display: flex; flex-wrap: wrap; gap: 8px; }
.legend span { display: inline-block; margin-right: 14px; } .swatch { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
svg { background: #fff; } svg text { font-size: 11px; fill: #333; } svg .chart-title { font-size: 13px; font-weight: 600; }
svg .plot { fill: none; stroke: #bbb; } svg .grid { stroke: #eee; } svg .group-line { stroke: #ccc; }
svg .mark-text { font-size: 9px; fill: #000; } code { font-size: 12px; }
)";

std::string page_open(const GateSummary& g) {
  return fmt::format("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                     "<title>loopgate report: {}</title>\n<style>{}</style>\n</head>\n<body>\n",
                     g.ok ? "OK" : "FAILED", kStyle);
}

// ---- header ----

std::string header(const GateSummary& g, const std::vector<ArmTrace>* env_source, const std::string& env_path,
                   const std::string& generated_at) {
  size_t total = 0, failed = 0;
  std::string fixtures;
  for (const FixtureRun& r : g.runs) {
    total += r.verdicts.size();
    for (const Verdict& v : r.verdicts) failed += !v.passed;
    fixtures += fmt::format("{}<a href=\"#fixture-{}\">{}</a> (np {}, {:.1f} s, exit {})", fixtures.empty() ? "" : ", ",
                            html_escape(r.fixture), html_escape(r.fixture), r.np, r.seconds, r.exit_code);
  }
  std::string arms;
  for (const std::string& a : g.arms) arms += (arms.empty() ? "" : ", ") + html_escape(a);
  std::string s = fmt::format("<header>\n<h1>loopgate gate report <span class=\"badge {}\" id=\"overall\">{}</span></h1>\n",
                              g.ok ? "ok" : "failed", g.ok ? "OK" : "FAILED");
  s += "<table class=\"summary\">\n";
  s += fmt::format("<tr><th>gate run started</th><td>{}</td></tr>\n", html_escape(g.started_at.empty() ? "(not recorded)" : g.started_at));
  s += fmt::format("<tr><th>gate run time</th><td>{:.1f} s</td></tr>\n", g.seconds);
  s += fmt::format("<tr><th>report written</th><td>{}</td></tr>\n", html_escape(generated_at));
  s += fmt::format("<tr><th>fixtures</th><td>{}</td></tr>\n", fixtures);
  s += fmt::format("<tr><th>candidate arms</th><td>{}</td></tr>\n", arms);
  s += fmt::format("<tr><th>verdicts</th><td id=\"totals\" data-total=\"{}\" data-failed=\"{}\">{} verdicts, {} failed: {}</td></tr>\n",
                   total, failed, total, failed, g.ok ? "OK" : "FAILED");
  s += "</table>\n";
  if (env_source != nullptr && !env_source->empty()) {
    const ArmTrace& t = env_source->front();
    s += fmt::format("<h3>Environment</h3>\n<p class=\"caption\">From the Trace <code>{}</code> (fixture {}, arm {}).</p>\n"
                     "<table class=\"environment\">\n",
                     html_escape(env_path), html_escape(t.trace.fixture), html_escape(t.arm));
    for (const auto& [k, v] : t.trace.environment)
      s += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", html_escape(k), html_escape(v));
    s += "</table>\n";
  }
  return s + "</header>\n";
}

// ---- verdict table ----

std::string cell_class(const std::string& text) {
  if (text == "PASS") return "pass";
  if (text == "REJECTED") return "rejected";
  if (text == "ACCEPTED!") return "accepted";
  if (text == "-") return "none";
  return "fail";
}

std::string verdict_table(const GateSummary& g) {
  std::string s = "<section id=\"verdicts\">\n<h2>Verdicts</h2>\n<p class=\"caption\">One row per fixture and check, as "
                  "<code>loopgate gate</code> prints it. <b>baseline</b>: the check's arm-independent tests; an arm's "
                  "cell counts its own tests plus those (<b>-</b>: none of its own ran); <b>defect</b>: the check's "
                  "planted-defect tests, REJECTED when the gate caught the defect.</p>\n<table class=\"verdicts\">\n"
                  "<tr><th>fixture</th><th>check</th><th>baseline</th>";
  for (const std::string& a : g.arms) s += "<th>" + html_escape(a) + "</th>";
  s += "<th>defect</th></tr>\n";
  auto cell = [](const std::string& arm, const std::string& text) {
    return fmt::format("<td class=\"{}\" data-arm=\"{}\">{}</td>", cell_class(text), html_escape(arm), html_escape(text));
  };
  for (const VerdictRow& r : verdict_rows(g.runs, g.arms)) {
    s += fmt::format("<tr class=\"verdict-row\" data-fixture=\"{}\" data-check=\"{}\"><td>{}</td><td>{}</td>",
                     html_escape(r.fixture), html_escape(r.check), html_escape(r.fixture), html_escape(r.check));
    s += cell("baseline", r.baseline);
    for (size_t i = 0; i < r.cells.size(); ++i) s += cell(g.arms[i], r.cells[i]);
    s += cell(kPlantedDefect, r.defect) + "</tr>\n";
  }
  return s + "</table>\n</section>\n";
}

// ---- failures ----

// The comparison lines of fixtures/compare.cpp Mismatch::describe: "iteration I rank R FIELD: BASE_ARM VALUE
// (decimal) vs CAND_ARM VALUE (decimal)"; checksums carry no decimal.
std::string mismatch_table(const std::vector<std::string>& lines) {
  static const std::regex kLine(
      R"(iteration (-?\d+) rank (\d+) ([^:]+): (\S+) (\S+)(?: \(([^)]*)\))? vs (\S+) (\S+)(?: \(([^)]*)\))?)");
  std::string rows, base_arm, cand_arm;
  for (const std::string& line : lines) {
    std::smatch m;
    if (!std::regex_search(line, m, kLine)) continue;
    if (rows.empty()) {
      base_arm = m[4];
      cand_arm = m[7];
    }
    auto value = [](const std::string& bits, const std::string& dec) {
      return "<code>" + html_escape(bits) + "</code>" + (dec.empty() ? "" : " (" + html_escape(dec) + ")");
    };
    rows += fmt::format("<tr class=\"mismatch\"><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td>"
                        "<td>{}</td></tr>\n",
                        html_escape(m[3]), html_escape(m[1]), html_escape(m[2]), value(m[5], m[6]), value(m[8], m[9]));
  }
  if (rows.empty()) return "";
  return fmt::format("<p class=\"caption\">The differences the gate listed, first differing value first.</p>\n"
                     "<table class=\"mismatches\">\n<tr><th>field</th><th>iteration</th><th>rank</th><th>{}</th>"
                     "<th>{}</th></tr>\n{}</table>\n",
                     html_escape(base_arm), html_escape(cand_arm), rows);
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

std::string failures(const GateSummary& g) {
  std::string s = "<section id=\"failures\">\n<h2>Failed checks</h2>\n";
  size_t n = 0;
  for (const FixtureRun& r : g.runs) {
    if (r.exit_code != 0 && r.verdicts.empty())
      s += fmt::format("<div class=\"failure\" data-fixture=\"{}\"><h3>{}: the suites exited {} with no verdicts</h3>"
                       "<p>See the log <code>{}</code>.</p></div>\n",
                       html_escape(r.fixture), html_escape(r.fixture), r.exit_code, html_escape(r.log_path));
    for (const Verdict& v : r.verdicts) {
      if (v.passed) continue;
      ++n;
      const std::vector<std::string> lines = split_lines(v.message);
      std::string shown;
      for (size_t i = 0; i < lines.size() && i < kMessageLines; ++i) shown += lines[i] + "\n";
      if (lines.size() > kMessageLines) shown += fmt::format("... ({} more lines)\n", lines.size() - kMessageLines);
      s += fmt::format("<div class=\"failure\" data-fixture=\"{}\" data-check=\"{}\" data-arm=\"{}\">\n"
                       "<h3>{} · {} · {}</h3>\n<p><code>{}</code></p>\n{}<pre>{}</pre>\n</div>\n",
                       html_escape(r.fixture), html_escape(v.check), html_escape(v.arm), html_escape(r.fixture),
                       html_escape(v.check), html_escape(v.arm), html_escape(v.test), mismatch_table(lines),
                       html_escape(shown));
    }
  }
  if (n == 0) s += "<p>None: every verdict passed.</p>\n";
  return s + "</section>\n";
}

// ---- per fixture: charts ----

struct Field {
  const char* key;
  const char* title;
  double (*get)(const IterationRecord&);
};
const Field kFields[] = {
    {"lm_loss", "lm loss", [](const IterationRecord& r) { return r.lm_loss; }},
    {"params_norm", "params norm", [](const IterationRecord& r) { return r.params_norm; }},
    {"grad_norm", "grad norm", [](const IterationRecord& r) { return r.grad_norm; }},
    {"learning_rate", "learning rate", [](const IterationRecord& r) { return r.learning_rate; }},
};

// One series per arm from the last rank's records (the last pipeline stage holds the loss). Widest first, so
// arms with the same values stay visible as nested stripes.
Series field_series(const ArmTrace& t, const Field& f, const std::vector<std::string>& order, size_t index, size_t n) {
  Series s;
  s.name = t.arm;
  s.color = arm_color(order, t.arm);
  s.width = 1.5 + static_cast<double>(n - 1 - index) * std::min(1.2, 7.5 / std::max<size_t>(1, n - 1));
  for (int64_t it : t.trace.iterations()) {
    const IterationRecord* r = t.trace.find(it, t.trace.world - 1);
    if (r == nullptr) continue;
    s.x.push_back(it);
    s.y.push_back(f.get(*r));
    s.label.push_back(value_label(f.get(*r)));
    s.exact.push_back(hex(f.get(*r)));
  }
  return s;
}

// "identical bits: a, b, c; own values: d" for one field.
std::string overlap_caption(const std::vector<Series>& series) {
  std::vector<std::vector<std::string>> groups;
  std::vector<const Series*> heads;
  for (const Series& s : series) {
    bool placed = false;
    for (size_t g = 0; g < heads.size() && !placed; ++g) {
      const Series& h = *heads[g];
      bool same = h.x == s.x && h.y.size() == s.y.size();
      for (size_t i = 0; same && i < s.y.size(); ++i) same = same_bits(h.y[i], s.y[i]);
      if (same) {
        groups[g].push_back(s.name);
        placed = true;
      }
    }
    if (!placed) {
      heads.push_back(&s);
      groups.push_back({s.name});
    }
  }
  std::string out;
  for (const auto& g : groups) {
    std::string names;
    for (const std::string& n : g) names += (names.empty() ? "" : ", ") + n;
    out += (out.empty() ? "" : "; ") + (g.size() > 1 ? "identical bits (lines overlap): " + names : "own values: " + names);
  }
  return out;
}

std::string legend(const std::vector<ArmTrace>& traces, const std::vector<std::string>& order) {
  std::string s = "<p class=\"legend\">";
  for (const ArmTrace& t : traces)
    s += fmt::format("<span><span class=\"swatch\" style=\"background:{}\"></span>{}</span>", arm_color(order, t.arm),
                     html_escape(t.arm));
  return s + "</p>\n";
}

std::string charts(const std::string& fixture, const std::vector<ArmTrace>& traces, const std::vector<std::string>& order) {
  const int last_rank = traces.front().trace.world - 1;
  std::string s = fmt::format("<h3>Loss, norms and learning rate per iteration</h3>\n{}<div class=\"charts\">\n",
                              legend(traces, order));
  std::string captions;
  for (const Field& f : kFields) {
    LineChart c;
    c.title = f.title;
    c.attrs = {{"data-fixture", fixture}, {"data-field", f.key}};
    for (size_t i = 0; i < traces.size(); ++i) c.series.push_back(field_series(traces[i], f, order, i, traces.size()));
    s += svg_line_chart(c);
    captions += fmt::format("<li><b>{}</b>: {}</li>\n", f.title, html_escape(overlap_caption(c.series)));
  }
  return s + fmt::format("</div>\n<p class=\"caption\">One line per arm ({} arms), from the clean scenario's last rank "
                         "(rank {}). Lines are drawn widest first, so arms whose values are identical overlap and show as "
                         "nested stripes; hover a point for its exact value (hexfloat).</p>\n<ul class=\"caption\">\n{}</ul>\n",
                         traces.size(), last_rank, captions);
}

// ---- per fixture: host reads per site ----

// Rank 0's reads per site, mean over iterations >= 2 (the first iteration pays one-off reads).
std::map<std::string, double> steady_reads(const Trace& t, size_t* iterations) {
  std::map<std::string, double> sum;
  *iterations = 0;
  for (int64_t it : t.iterations()) {
    const IterationRecord* r = t.find(it, 0);
    if (it < 2 || r == nullptr) continue;
    ++*iterations;
    for (const auto& [site, n] : r->reads_per_site) sum[site] += static_cast<double>(n);
  }
  for (auto& [site, v] : sum) v /= static_cast<double>(std::max<size_t>(1, *iterations));
  return sum;
}

std::string reads(const std::string& fixture, const std::vector<ArmTrace>& traces) {
  std::vector<Bar> bars;
  std::set<std::string> site_set;
  size_t iterations = 0;
  for (const ArmTrace& t : traces) {
    Bar b{t.arm, {}};
    for (const auto& [site, v] : steady_reads(t.trace, &iterations)) {
      b.parts.push_back({site, v});
      site_set.insert(site);
    }
    bars.push_back(b);
  }
  const std::vector<std::string> sites(site_set.begin(), site_set.end());
  std::string s = "<h3>Host reads per site per iteration</h3>\n";
  s += svg_stacked_bars("host reads per iteration (rank 0, steady state)", bars, sites, {{"data-fixture", fixture}});
  s += fmt::format("<p class=\"caption\">Rank 0's <code>reads_per_site</code> in the clean scenario, mean over iterations "
                   "&ge; 2 ({} iterations; the first pays one-off reads).</p>\n<table class=\"reads\">\n<tr><th>site \\ arm</th>",
                   iterations);
  for (const Bar& b : bars) s += "<th>" + html_escape(b.name) + "</th>";
  s += "</tr>\n";
  std::vector<double> totals(bars.size(), 0.0);
  for (const std::string& site : sites) {
    s += "<tr data-site=\"" + html_escape(site) + "\"><th>" + html_escape(site) + "</th>";
    for (size_t i = 0; i < bars.size(); ++i) {
      const auto& parts = bars[i].parts;
      auto it = std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.first == site; });
      const double v = it == parts.end() ? 0.0 : it->second;
      totals[i] += v;
      s += fmt::format("<td class=\"num\">{:.6g}</td>", v);
    }
    s += "</tr>\n";
  }
  s += "<tr data-site=\"(total)\"><th>total</th>";
  for (double t : totals) s += fmt::format("<td class=\"num\"><b>{:.6g}</b></td>", t);
  s += "</tr>\n";
  return s + "</table>\n";
}

// ---- per fixture: timer intervals ----

std::string timeline(const std::string& fixture, const std::vector<ArmTrace>& traces) {
  std::vector<TimelineMark> marks;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const ArmTrace& t : traces)
    for (int64_t it : t.trace.iterations()) {
      first = std::min(first, it);
      last = std::max(last, it);
      const IterationRecord* r = t.trace.find(it, t.trace.world - 1);
      if (r == nullptr) continue;
      for (const TimerInterval& iv : r->timer_intervals)
        marks.push_back({t.arm, iv.name, it, iv.seq, iv.seconds,
                         fmt::format("{}: {} #{} reported at iteration {}: {:.6g} s ({})", t.arm, iv.name, iv.seq, it,
                                     iv.seconds, hex(iv.seconds))});
    }
  if (marks.empty()) return "<h3>Timer intervals</h3>\n<p>No timer interval was reported.</p>\n";
  std::string s = "<h3>Timer intervals</h3>\n";
  s += svg_timeline("timer intervals by the iteration that reported them", marks, first, last, {{"data-fixture", fixture}});
  return s + fmt::format(
                 "<p class=\"caption\">The clean scenario's last rank (rank {}): each box is one interval "
                 "(<code>#seq</code>: its sequence number) in the column of the iteration that reported it; its length is "
                 "the interval's seconds relative to the longest interval of that timer; its colour is the lag "
                 "(iteration &minus; 1 &minus; seq). Eager timers report at the iteration they end; deferred ones a "
                 "window later. Two boxes in one cell: two windows reported at once. Hover a box for its seconds.</p>\n",
                 traces.front().trace.world - 1);
}

std::string fixture_block(const FixtureRun& r, const std::vector<ArmTrace>& traces, const std::vector<std::string>& order) {
  std::string s = fmt::format("<section class=\"fixture\" id=\"fixture-{}\" data-fixture=\"{}\">\n<h2>Fixture {} (np {})</h2>\n",
                              html_escape(r.fixture), html_escape(r.fixture), html_escape(r.fixture), r.np);
  if (traces.empty())
    return s + "<p>No clean-scenario Trace was written for this fixture (none of the selected checks ran it).</p>\n</section>\n";
  return s + charts(r.fixture, traces, order) + reads(r.fixture, traces) + timeline(r.fixture, traces) + "</section>\n";
}

}  // namespace

std::string render_report(const GateSummary& g, const std::string& base_dir, const std::string& generated_at) {
  const std::vector<std::string> order = arm_order(g);
  std::vector<std::vector<ArmTrace>> traces;
  for (const FixtureRun& r : g.runs) traces.push_back(clean_traces(r, order, base_dir));
  // The environment shown: the first fixture's first clean Trace (baseline when it ran).
  const std::vector<ArmTrace>* env = nullptr;
  std::string env_path;
  for (size_t i = 0; i < traces.size() && env == nullptr; ++i) {
    if (traces[i].empty()) continue;
    env = &traces[i];
    for (const TraceFile& t : g.runs[i].traces)
      if (t.scenario == kCleanScenario && t.arm == traces[i].front().arm && env_path.empty()) env_path = t.path;
  }
  std::string page = page_open(g) + header(g, env, env_path, generated_at) + verdict_table(g) + failures(g);
  for (size_t i = 0; i < g.runs.size(); ++i) page += fixture_block(g.runs[i], traces[i], order);
  return page + "</body>\n</html>\n";
}

std::string render_report_file(const std::string& path, const std::string& generated_at) {
  std::ifstream in(path);
  LG_INPUT_CHECK(in.good(), "--gate: cannot read '{}'", path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  LG_INPUT_CHECK(!j.is_discarded(), "--gate: '{}' is not JSON", path);
  const fs::path base = fs::absolute(path).parent_path();
  return render_report(gate_from_json(j), base.string(), generated_at);
}

int cmd_report(const ReportOptions& o) {
  // Before rendering: --gate readable, --out writable (paths.h).
  check_input_file("--gate", o.gate_json);
  const fs::path out = o.out.empty() ? fs::absolute(o.gate_json).parent_path() / "report.html" : fs::absolute(o.out);
  check_output_file(o.out.empty() ? "--out (default: report.html beside --gate)" : "--out",
                    o.out.empty() ? out.string() : o.out);
  if (stop_after_validation()) return 0;
  const std::string page = render_report_file(o.gate_json, utc_now());
  std::ofstream f(out);
  LG_INPUT_CHECK(f.good(), "--out: cannot write '{}'", out.string());
  f << page;
  f.close();
  LG_INPUT_CHECK(f.good(), "--out: writing '{}' failed", out.string());
  std::printf("loopgate report: %zu KB written to %s\n", (page.size() + 1023) / 1024, out.lexically_normal().c_str());
  return 0;
}

CLI::App* add_report_command(CLI::App& app, ReportOptions& ro) {
  CLI::App* report = app.add_subcommand("report", "write one self-contained HTML page from `loopgate gate --json` output");
  report->add_option("--gate", ro.gate_json, "the JSON written by `loopgate gate --json` (readable)")->required();
  report->add_option("--out", ro.out, "the HTML file (default: report.html beside the gate JSON; checked writable first)");
  return report;
}

}  // namespace loopgate
