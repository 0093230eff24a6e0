// `loopgate ab A B`: is B's step time different from A's, by how much, with what confidence. Samples are
// milliseconds per iteration per window: wall clock between log-line timestamps ÷ the iterations between them
// when the log has timestamps (the seed's measure: both arms' machinery is identical there), else the
// "elapsed time per iteration (ms)" field (a Trace's interval-time timer, golden values' iteration-time).
// The first window of every run is warm-up and dropped. Exit 0 (report printed) or 2 (bad input).
// Not here: the statistics (tools/analysis/stats.cpp), reading files (tools/analysis/megatron_log.cpp).
#include "tools/loopgate/ab.h"

#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include "tools/loopgate/commands.h"
#include "tools/loopgate/validate.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

struct Window {
  int64_t after = 0, last = 0;  // covers iterations after+1 .. last
  double ms = 0;                // per iteration
};

std::string span_text(int64_t after, int64_t last) {
  return after + 1 == last ? fmt::format("iteration {}", last) : fmt::format("iterations {}-{}", after + 1, last);
}

// Window ends: the first entry, then every entry (window 0) or those at iterations divisible by the window.
std::vector<size_t> window_ends(const std::vector<const RunEntry*>& es, int64_t window) {
  std::vector<size_t> ends = {0};
  for (size_t i = 1; i < es.size(); ++i)
    if (window == 0 || es[i]->iteration % window == 0) ends.push_back(i);
  return ends;
}

// Wall clock between window ends ÷ iterations between them. The first stamped line starts the first window.
std::vector<Window> timestamp_windows(const RunLog& run, const std::vector<const RunEntry*>& es, int64_t window) {
  std::vector<Window> out;
  std::vector<size_t> ends = window_ends(es, window);
  for (size_t k = 1; k < ends.size(); ++k) {
    const RunEntry& from = *es[ends[k - 1]];
    const RunEntry& to = *es[ends[k]];
    const double dt = *to.timestamp - *from.timestamp;
    LG_INPUT_CHECK(dt >= 0, "{}: timestamp [{}] is earlier than [{}] at {}", run.where(to), to.timestamp_text,
                   from.timestamp_text, run.where(from));
    out.push_back({from.iteration, to.iteration, dt * 1000.0 / static_cast<double>(to.iteration - from.iteration)});
  }
  return out;
}

// Each entry's elapsed field covers the iterations since the previous entry; a window averages its entries
// weighted by those spans. The first entry alone is the first window.
std::vector<Window> elapsed_windows(const std::vector<const RunEntry*>& es, int64_t window) {
  std::vector<Window> out;
  std::vector<size_t> ends = window_ends(es, window);
  size_t start = 0;
  for (size_t end : ends) {
    double sum = 0;
    int64_t its = 0;
    for (size_t i = start; i <= end; ++i) {
      const int64_t span = es[i]->iteration - (i == 0 ? 0 : es[i - 1]->iteration);
      sum += *es[i]->elapsed_ms * static_cast<double>(span);
      its += span;
    }
    const int64_t after = start == 0 ? 0 : es[start - 1]->iteration;
    if (its > 0) out.push_back({after, es[end]->iteration, sum / static_cast<double>(its)});
    start = end + 1;
  }
  return out;
}

const char* elapsed_source(RunKind kind) {
  switch (kind) {
    case RunKind::kTrace: return "interval-time";
    case RunKind::kGoldenValues: return "iteration-time";
    default: return "elapsed field";
  }
}

std::string fixed3(double v) { return fmt::format("{:.3f}", v); }

}  // namespace

void check_step_time_options(const StepTimeOptions& o) {
  LG_INPUT_CHECK(o.window >= 0, "--window {}: must be >= 0 (0 = one window per log line)", o.window);
  LG_INPUT_CHECK(o.warmup_windows >= 0, "--warmup-windows {}: must be >= 0", o.warmup_windows);
  LG_INPUT_CHECK(o.source == "auto" || o.source == "timestamps" || o.source == "elapsed",
                 "--time-source '{}': must be auto, timestamps or elapsed", o.source);
}

AbSamples step_time_samples(const RunLog& run, const StepTimeOptions& o, const std::string& label) {
  AbSamples s;
  s.label = label;
  s.names = {run.path};
  std::vector<const RunEntry*> stamped, timed;
  for (const RunEntry& e : run.entries) {
    if (e.timestamp) stamped.push_back(&e);
    if (e.elapsed_ms) timed.push_back(&e);
  }
  const bool all_stamped = stamped.size() >= 2 && stamped.size() == run.entries.size();
  bool use_stamps = o.source == "timestamps" || (o.source == "auto" && all_stamped);
  LG_INPUT_CHECK(!use_stamps || all_stamped, "{}: --time-source timestamps, but {} of {} iteration lines have one",
                 run.path, stamped.size(), run.entries.size());
  std::vector<Window> windows;
  if (use_stamps) {
    windows = timestamp_windows(run, stamped, o.window);
    const bool whole_seconds = std::none_of(stamped.begin(), stamped.end(), [](const RunEntry* e) {
      return e->timestamp_text.find('.') != std::string::npos;
    });
    std::vector<double> durations;
    for (const Window& w : windows) durations.push_back(w.ms * static_cast<double>(w.last - w.after) / 1000.0);
    const double typical = durations.empty() ? 0.0 : median_of(durations);
    if (whole_seconds && typical < 10.0) {
      const std::string why = fmt::format("timestamps have 1 s resolution and a window lasts {:.1f} s", typical);
      if (o.source == "auto" && !timed.empty()) {
        s.notes.push_back(run.path + ": " + why + ": the elapsed-time field is used instead");
        use_stamps = false;
      } else {
        s.notes.push_back(run.path + ": " + why + ": samples are coarse (use --window to lengthen windows)");
      }
    }
    // Timestamps printed when the line is printed, not at the log point, show as windows far from the elapsed field.
    if (use_stamps && !timed.empty() && !windows.empty()) {
      std::vector<double> stamp_ms, field_ms;
      for (const Window& w : windows) stamp_ms.push_back(w.ms);
      for (const Window& w : elapsed_windows(timed, o.window)) field_ms.push_back(w.ms);
      const double ratio = median_of(stamp_ms) / median_of(field_ms);
      if (!(ratio > 0.5 && ratio < 2.0))
        s.notes.push_back(fmt::format("{}: timestamps give a median {:.3f} ms/iteration but the elapsed field {:.3f}: "
                                      "were the lines stamped when printed rather than at their log points? "
                                      "(--time-source elapsed uses the field)",
                                      run.path, median_of(stamp_ms), median_of(field_ms)));
    }
  } else if (o.source == "auto" && !stamped.empty()) {
    s.notes.push_back(fmt::format("{}: {} of {} iteration lines have a timestamp: the elapsed-time field is used",
                                  run.path, stamped.size(), run.entries.size()));
  }
  if (!use_stamps) {
    LG_INPUT_CHECK(!timed.empty(), "{}: no step times (no timestamped lines, no 'elapsed time per iteration (ms)', "
                                   "interval-time or iteration-time values)", run.path);
    windows = elapsed_windows(timed, o.window);
  }
  s.source = use_stamps ? "timestamps" : elapsed_source(run.kind);
  s.windows = static_cast<int64_t>(windows.size());
  int64_t drop = o.warmup_windows;
  // Megatron HEAD prints iteration 1 without resetting the interval timer, so the next line's elapsed field still
  // averages iteration 1 in (docs/design.md "GPU facts"): its window is warm-up too. Timestamps are not affected.
  const bool head_first_line = !use_stamps && run.kind == RunKind::kMegatronLog && drop >= 1 && windows.size() > 1 &&
                               windows.front().last == 1;
  if (head_first_line) ++drop;
  s.dropped = std::min<int64_t>(drop, s.windows);
  if (s.dropped > 0)
    s.notes.push_back(fmt::format("{}: {} warm-up window{} dropped ({}){}", run.path, s.dropped, s.dropped > 1 ? "s" : "",
                                  span_text(windows.front().after, windows[static_cast<size_t>(s.dropped - 1)].last),
                                  head_first_line ? ": the line after iteration 1's still averages iteration 1 in "
                                                    "(Megatron does not reset after the first line)"
                                                  : ""));
  for (size_t i = static_cast<size_t>(s.dropped); i < windows.size(); ++i) s.samples.push_back(windows[i].ms);
  return s;
}

AbSamples pool_samples(const std::vector<AbSamples>& runs, const std::string& label) {
  AbSamples p;
  p.label = label;
  std::vector<std::string> sources;
  for (const AbSamples& r : runs) {
    p.names.insert(p.names.end(), r.names.begin(), r.names.end());
    p.samples.insert(p.samples.end(), r.samples.begin(), r.samples.end());
    p.notes.insert(p.notes.end(), r.notes.begin(), r.notes.end());
    p.windows += r.windows;
    p.dropped += r.dropped;
    if (std::find(sources.begin(), sources.end(), r.source) == sources.end()) sources.push_back(r.source);
  }
  for (const std::string& src : sources) p.source += (p.source.empty() ? "" : "+") + src;
  return p;
}

std::string mixed_sources_note(const AbSamples& a, const AbSamples& b) {
  if (a.source == b.source) return "";
  return fmt::format("{} and {} measured step time differently ({}: {}; {}: {}): the medians compare different clocks "
                     "(--time-source timestamps or elapsed makes both sides the same)",
                     a.label, b.label, a.label, a.source, b.label, b.source);
}

std::vector<double> run_medians(const std::vector<AbSamples>& runs) {
  std::vector<double> out;
  for (const AbSamples& r : runs)
    if (!r.samples.empty()) out.push_back(median_of(r.samples));
  return out;
}

void print_ab_report(std::FILE* out, const AbSamples& a, const AbSamples& b, const AbStats& s, bool descriptive) {
  const std::string head = fmt::format("{:<5} {:>4}  {:<28} {:>7} {:>7} {:>7} {:>10} {:>10} {:>10}", "side", "runs",
                                       "source", "windows", "warm-up", "samples", "median", "min", "max");
  const std::string units = fmt::format("{:<5} {:>4}  {:<28} {:>7} {:>7} {:>7} {:>10} {:>10} {:>10}", "", "", "", "",
                                        "dropped", "", "ms/iter", "ms/iter", "ms/iter");
  fmt::print(out, "{}\n{}\n{}\n", head, units, std::string(head.size(), '-'));
  for (const AbSamples* side : {&a, &b}) {
    const auto [lo, hi] = std::minmax_element(side->samples.begin(), side->samples.end());
    fmt::print(out, "{:<5} {:>4}  {:<28} {:>7} {:>7} {:>7} {:>10} {:>10} {:>10}\n", side->label, side->names.size(),
               side->source, side->windows, side->dropped, side->samples.size(),
               side->samples.empty() ? "-" : fixed3(median_of(side->samples)),
               side->samples.empty() ? "-" : fixed3(*lo), side->samples.empty() ? "-" : fixed3(*hi));
  }
  for (const AbSamples* side : {&a, &b}) {
    std::string names;
    for (const std::string& n : side->names) names += (names.empty() ? "" : ", ") + n;
    fmt::print(out, "  {}: {}\n", side->label, names);
  }
  for (const AbSamples* side : {&a, &b})
    for (const std::string& n : side->notes) fmt::print(out, "  note: {}\n", n);
  if (const std::string mixed = mixed_sources_note(a, b); !mixed.empty()) fmt::print(out, "  note: {}\n", mixed);
  fmt::print(out, "{}\n", std::string(head.size(), '-'));
  fmt::print(out,
             "Mann-Whitney U({}) = {:g} of {}, two-sided p = {:.4g} ({}, {} v {}); Hodges-Lehmann shift {} - {} = {:.3f} "
             "ms/iter, CI [{:.3f}, {:.3f}] (coverage {:g} %, k = {}); median ratio {}/{} = {:.4f}\n",
             a.label, s.u_a, s.n_a * s.n_b, s.p_value, s.method, s.n_a, s.n_b, b.label, a.label, s.shift, s.ci_low,
             s.ci_high, std::round(s.ci_coverage * 1000.0) / 10.0, s.ci_k, b.label, a.label, s.ratio);
  AbWording w;
  w.name_a = a.label;
  w.name_b = b.label;
  w.descriptive = descriptive;
  fmt::print(out, "{}\n", ab_sentence(s, w));
}

nlohmann::json ab_stats_json(const AbStats& s) {
  return {{"n_a", s.n_a},       {"n_b", s.n_b},           {"median_a", s.median_a},
          {"median_b", s.median_b}, {"ratio", s.ratio},   {"shift", s.shift},
          {"ci_low", s.ci_low}, {"ci_high", s.ci_high},   {"ci_coverage", s.ci_coverage},
          {"ci_reaches_level", s.ci_reaches_level},       {"u_a", s.u_a},
          {"ties", s.ties},     {"p_value", s.p_value},   {"method", s.method},
          {"alpha", s.alpha},   {"significant", s.significant}, {"min_p", s.min_p},
          {"sentence", s.sentence}};
}

nlohmann::json ab_report_json(const AbSamples& a, const AbSamples& b, const AbStats& s) {
  auto side = [](const AbSamples& x) {
    return nlohmann::json{{"label", x.label},     {"files", x.names},     {"source", x.source},
                          {"windows", x.windows}, {"dropped", x.dropped}, {"samples_ms", x.samples},
                          {"notes", x.notes}};
  };
  nlohmann::json j = {{"a", side(a)}, {"b", side(b)}, {"stats", ab_stats_json(s)}};
  if (const std::string mixed = mixed_sources_note(a, b); !mixed.empty()) j["mixed_sources"] = mixed;
  return j;
}

// ---- loopgate ab ----

std::unique_ptr<std::ofstream> open_json_output(const std::string& path) {
  if (path.empty()) return nullptr;
  check_output_file("--json", path);
  auto f = std::make_unique<std::ofstream>(path);
  LG_INPUT_CHECK(f->good(), "--json {}: cannot write the file", path);
  return f;
}

void require_samples(const AbSamples& s, const StepTimeOptions& o) {
  LG_INPUT_CHECK(s.samples.size() >= 2,
                 "{} ({}): {} step-time window(s) left after dropping {} warm-up window(s); need at least 2 (a longer "
                 "run, a smaller --window or --warmup-windows)",
                 s.label, s.names.empty() ? "" : s.names.front(), s.samples.size(), o.warmup_windows);
}

int cmd_ab(const AbOptions& o) {
  validate_ab_options(o);  // every flag, both files readable, --json writable (validate.h)
  if (stop_after_validation()) return 0;
  std::unique_ptr<std::ofstream> json = open_json_output(o.json_path);
  const RunLog a = read_run(o.a), b = read_run(o.b);
  const AbSamples sa = step_time_samples(a, o.step, "A"), sb = step_time_samples(b, o.step, "B");
  require_samples(sa, o.step);
  require_samples(sb, o.step);
  const AbStats s = ab_statistics(sa.samples, sb.samples, o.alpha);
  std::printf("loopgate ab: step time per window, A = %s (%s), B = %s (%s)\n", o.a.c_str(), run_kind_name(a.kind),
              o.b.c_str(), run_kind_name(b.kind));
  // One run a side: its windows share the run's machine and clocks, so the verdict counts runs, not windows.
  const StepTimeVerdict v = step_time_verdict(run_medians({sa}), run_medians({sb}), o.alpha);
  print_ab_report(stdout, sa, sb, s, /*descriptive=*/true);
  std::printf("verdict (runs as units): %s\n", v.sentence.c_str());
  if (json) {
    nlohmann::json j = ab_report_json(sa, sb, s);
    j["verdict"] = {{"kind", step_time_verdict_name(v.kind)}, {"sentence", v.sentence}, {"runs_a", v.runs_a},
                    {"runs_b", v.runs_b}};
    *json << j.dump(1) << "\n";
  }
  return 0;
}

void add_step_time_flags(CLI::App* cmd, std::string& json_path, double& alpha, StepTimeOptions& step) {
  cmd->add_option("--json", json_path, "write the report as JSON to FILE (checked writable first)");
  cmd->add_option("--alpha", alpha, "significance level of the Mann-Whitney test, in (0, 1) (default 0.05)");
  cmd->add_option("--window", step.window, "iterations per step-time window, >= 0 (default 0: one window per log line)");
  cmd->add_option("--warmup-windows", step.warmup_windows, "windows dropped at the start of each run, >= 0 (default 1)");
  cmd->add_option("--time-source", step.source,
                  "auto (timestamps when every line has one, else the elapsed field) | timestamps | elapsed");
}

}  // namespace loopgate
