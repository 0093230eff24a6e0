// The three readers behind RunLog (megatron_log.h): Megatron stdout log text, functional-test golden values,
// loopgate Traces; and the comparison of logged values at their printed precision.
// Not here: what the values mean for a verdict (tools/loopgate/compare.cpp).
#include "tools/analysis/megatron_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "trainer/common/error.h"

namespace loopgate {
namespace {

// ---- printed numbers ----

// The shape of a printed number: scientific ("1.000000E-07") or fixed ("311.932"), its decimals, and the
// exponent of its last digit (quantum 10^q): what "as printed" can tell apart.
struct PrintedForm {
  bool ok = false, sci = false, upper = true;
  int decimals = 0;
  int quantum_exp = 0;
};

PrintedForm printed_form(const std::string& t) {
  static const std::regex number(R"(^[+-]?\d+(?:\.(\d*))?(?:([eE])([+-]?\d+))?$)");
  std::smatch m;
  PrintedForm f;
  if (!std::regex_match(t, m, number)) return f;
  f.ok = true;
  f.decimals = static_cast<int>(m[1].length());
  f.sci = m[2].matched;
  f.upper = f.sci && m[2].str() == "E";
  f.quantum_exp = (f.sci ? std::stoi(m[3].str()) : 0) - f.decimals;
  return f;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// strtod over the whole token: decimals, exponents, and Python's "nan", "NAN", "inf", "-inf".
std::optional<double> parse_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_int(const std::string& s) {
  static const std::regex integer(R"(^-?\d{1,18}$)");
  if (!std::regex_match(s, integer)) return std::nullopt;
  return std::stoll(s);
}

// ---- log lines ----

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

std::optional<double> parse_timestamp(const std::string& t) {
  static const std::regex stamp(R"(^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?$)");
  std::smatch m;
  if (!std::regex_match(t, m, stamp)) return std::nullopt;
  auto n = [&](int i) { return std::stoll(m[i].str()); };
  const int64_t y = n(1), mo = n(2), d = n(3), h = n(4), mi = n(5), s = n(6);
  static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || (mo == 2 && d == 29 && !leap)) return std::nullopt;
  if (h > 23 || mi > 59 || s > 60) return std::nullopt;
  const double frac = m[7].matched ? std::stod("0" + m[7].str()) : 0.0;
  return static_cast<double>(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s) + frac;
}

// Strips the rank tags launchers put before a line (megatron_log.h lists them); at most two (srun + torchrun).
std::string strip_rank_prefixes(const std::string& line) {
  static const std::regex prefix(R"(^(\[rank\d+\]:|\[default\d+\]:|\[\d+,\d+\]<std(?:out|err)>:|\d+:)[ \t]?)");
  std::string s = line;
  for (int i = 0; i < 2; ++i) {
    std::smatch m;
    if (!std::regex_search(s, m, prefix)) break;
    s = m.suffix().str();
  }
  return s;
}

[[noreturn]] void bad_line(const std::string& name, int line, const std::string& what) {
  throw InputError(fmt::format("{}:{}: {}", name, line, what));
}

void set_value(std::optional<LoggedValue>& slot, const std::string& key, const std::string& value,
               const std::string& name, int line) {
  std::optional<double> v = parse_double(value);
  if (!v) bad_line(name, line, fmt::format("field '{}': unparsable number '{}'", key, value));
  slot = LoggedValue{*v, value, false};
}

void set_count(std::optional<int64_t>& slot, const std::string& key, const std::string& value, const std::string& name,
               int line) {
  std::optional<int64_t> v = parse_int(value);
  if (!v) bad_line(name, line, fmt::format("field '{}': unparsable integer '{}'", key, value));
  slot = *v;
}

// One "key: value" between bars. Known keys are parsed (and must parse); every other key is kept as printed.
void parse_field(RunEntry& e, const std::string& piece, const std::string& name, int line) {
  const size_t colon = piece.find(':');
  if (colon == std::string::npos) bad_line(name, line, fmt::format("field '{}' has no ':'", piece));
  const std::string key = trim(piece.substr(0, colon)), value = trim(piece.substr(colon + 1));
  if (key.empty() || value.empty()) bad_line(name, line, fmt::format("field '{}' has an empty key or value", piece));
  if (value.find(':') != std::string::npos)
    bad_line(name, line, fmt::format("field '{}' holds two values (a missing '|'?)", piece));
  if (key == "lm loss") return set_value(e.lm_loss, key, value, name, line);
  if (key == "params norm") return set_value(e.params_norm, key, value, name, line);
  if (key == "grad norm") return set_value(e.grad_norm, key, value, name, line);
  if (key == "num zeros") return set_value(e.num_zeros, key, value, name, line);
  if (key == "learning rate") return set_value(e.learning_rate, key, value, name, line);
  if (key == "loss scale") return set_value(e.loss_scale, key, value, name, line);
  if (key == "number of skipped iterations") return set_count(e.skipped_iterations, key, value, name, line);
  if (key == "number of nan iterations") return set_count(e.nan_iterations, key, value, name, line);
  if (key == "elapsed time per iteration (ms)") {
    std::optional<LoggedValue> v;
    set_value(v, key, value, name, line);
    e.elapsed_ms = v->value;
    return;
  }
  if ((key == "consumed samples" || key == "skipped samples" || key == "global batch size") && !parse_int(value))
    bad_line(name, line, fmt::format("field '{}': unparsable integer '{}'", key, value));
  e.other[key] = value;
}

// An iteration line -> its entry; any other line -> nullopt; a malformed iteration line -> InputError.
std::optional<RunEntry> parse_log_line(const std::string& raw, int line, const std::string& name) {
  if (raw.find("iteration") == std::string::npos) return std::nullopt;  // most noise: cheap
  // [ [timestamp]] iteration N/ M |
  static const std::regex head(R"(^[ \t]*(?:\[([^\]]*)\][ \t]*)?iteration[ \t]+([^\s/|]+)[ \t]*/[ \t]*([^\s|]*)[ \t]*(\|?))");
  static const std::regex anywhere(R"(iteration\s+\d+\s*/\s*\d+\s*\|)");
  const std::string s = strip_rank_prefixes(raw);
  std::smatch m;
  if (!std::regex_search(s, m, head)) {
    std::smatch a;
    if (std::regex_search(raw, a, anywhere))
      bad_line(name, line, fmt::format("an iteration line behind an unrecognised prefix '{}' (accepted: '[rankN]: ', "
                                       "'[defaultN]:', '[1,N]<stdout>:', 'N: ')",
                                       trim(raw.substr(0, static_cast<size_t>(a.position(0))))));
    return std::nullopt;
  }
  RunEntry e;
  e.line = line;
  if (m[1].matched) {
    e.timestamp_text = m[1].str();
    e.timestamp = parse_timestamp(e.timestamp_text);
    if (!e.timestamp)
      bad_line(name, line, fmt::format("bad timestamp '[{}]' (expected [YYYY-MM-DD HH:MM:SS] or [YYYY-MM-DD "
                                       "HH:MM:SS.ffffff])", e.timestamp_text));
  }
  std::optional<int64_t> it = parse_int(m[2].str()), total = parse_int(m[3].str());
  if (!it || *it < 0) bad_line(name, line, fmt::format("unparsable iteration number '{}'", m[2].str()));
  if (!total) bad_line(name, line, fmt::format("unparsable number of iterations '{}' after '/'", m[3].str()));
  if (m[4].length() == 0) bad_line(name, line, fmt::format("missing '|' after 'iteration {}/ {}'", *it, *total));
  e.iteration = *it;
  e.train_iters = *total;
  const std::string rest = m.suffix().str();
  const size_t last_bar = rest.find_last_of('|');
  if (!trim(last_bar == std::string::npos ? rest : rest.substr(last_bar + 1)).empty())
    bad_line(name, line, "the line does not end with '|' (truncated, or a missing '|')");
  std::set<std::string> seen;
  size_t from = 0;
  while (last_bar != std::string::npos && from < last_bar) {
    const size_t bar = rest.find('|', from);
    const std::string piece = trim(rest.substr(from, bar - from));
    if (piece.empty()) bad_line(name, line, "an empty field between two '|'");
    const std::string key = trim(piece.substr(0, piece.find(':')));
    if (!seen.insert(key).second) bad_line(name, line, fmt::format("field '{}' appears twice", key));
    parse_field(e, piece, name, line);
    from = bar + 1;
  }
  return e;
}

LoggedValue exact_value(double v) { return LoggedValue{v, hex(v), true}; }

void sort_entries(RunLog& log) {
  std::stable_sort(log.entries.begin(), log.entries.end(),
                   [](const RunEntry& a, const RunEntry& b) { return a.iteration < b.iteration; });
}

}  // namespace

// ---- RunLog ----

const char* run_kind_name(RunKind kind) {
  switch (kind) {
    case RunKind::kMegatronLog: return "Megatron log";
    case RunKind::kGoldenValues: return "golden values";
    case RunKind::kTrace: return "loopgate Trace";
    case RunKind::kShimValues: return "shim values";
  }
  return "?";
}

const RunEntry* RunLog::find(int64_t iteration) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), iteration,
                             [](const RunEntry& e, int64_t i) { return e.iteration < i; });
  return it != entries.end() && it->iteration == iteration ? &*it : nullptr;
}

std::string RunLog::where(const RunEntry& e) const {
  if (kind == RunKind::kMegatronLog) return fmt::format("{}:{}", path, e.line);
  return fmt::format("{} iteration {}", path, e.iteration);
}

// ---- Megatron log text ----

RunLog parse_megatron_log(const std::string& text, const std::string& name) {
  RunLog log;
  log.path = name;
  log.kind = RunKind::kMegatronLog;
  std::map<int64_t, int> first_line;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    std::optional<RunEntry> e = parse_log_line(raw, line, name);
    if (!e) continue;
    auto [at, fresh] = first_line.emplace(e->iteration, line);
    if (!fresh) bad_line(name, line, fmt::format("iteration {} is logged twice (first at line {})", e->iteration,
                                                 at->second));
    log.entries.push_back(std::move(*e));
  }
  LG_INPUT_CHECK(!log.entries.empty(), "{}: no Megatron iteration line ('iteration N/ M | ...')", name);
  sort_entries(log);
  log.arguments = read_arguments_block(text, name);
  return log;
}

// ---- the arguments block ----

namespace {
constexpr const char* kArgumentsOpen = "------------------------ arguments ------------------------";
constexpr const char* kArgumentsClose = "-------------------- end of arguments ---------------------";
}  // namespace

std::string format_arguments_block(const std::map<std::string, std::string>& arguments) {
  std::string out = std::string(kArgumentsOpen) + "\n";
  for (const auto& [arg, value] : arguments) {
    const size_t dots = arg.size() < 48 ? 48 - arg.size() : 0;
    out += fmt::format("  {} {} {}\n", arg, std::string(dots, '.'), value);
  }
  return out + kArgumentsClose + "\n";
}

std::optional<std::map<std::string, std::string>> read_arguments_block(const std::string& text,
                                                                       const std::string& name) {
  // "  NAME ..... VALUE"; a name of 48 characters or more gets no dots ("  NAME  VALUE"); VALUE may be empty.
  static const std::regex entry(R"(^\s+(\S+) \.* ?(.*)$)");
  std::istringstream in(text);
  std::string raw;
  int line = 0, opened = 0;
  std::map<std::string, std::string> out;
  while (std::getline(in, raw)) {
    ++line;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string s = strip_rank_prefixes(raw);
    if (!opened) {
      if (trim(s) == kArgumentsOpen) opened = line;
      continue;
    }
    if (trim(s) == kArgumentsClose) return out;
    std::smatch m;
    // Another process's output can land inside the block (a warning from rank 3): not an argument, skipped.
    if (std::regex_match(s, m, entry)) out[m[1].str()] = m[2].str();
  }
  if (opened) bad_line(name, opened, "the arguments block has no 'end of arguments' line");
  return std::nullopt;
}

// ---- golden values (Megatron functional tests; fixtures/golden.cpp writes the same layout + values_hex) ----

namespace {

// Megatron writes the string "nan" for a step it did not record (a resumed run's steps before the resume, a
// metric logged less often than another): absent, not a NaN value. A NaN loss that was recorded comes from
// TensorBoard as a float, never as this string.
bool not_recorded(const nlohmann::json& v) { return v.is_string() && v.get<std::string>() == "nan"; }

// One metric's steps -> values. Current files key values by step; older ones hold a list whose i-th value is
// step start_step + i * step_interval.
std::vector<std::pair<int64_t, const nlohmann::json*>> metric_steps(const nlohmann::json& m, const std::string& key,
                                                                   const std::string& name) {
  std::vector<std::pair<int64_t, const nlohmann::json*>> out;
  const nlohmann::json& values = m["values"];
  if (values.is_array()) {
    auto integer = [&](const char* field, int64_t fallback) {
      if (!m.contains(field)) return fallback;
      LG_INPUT_CHECK(m[field].is_number_integer(), "{}: metric '{}': {} {} is not an integer", name, key, field,
                     m[field].dump());
      return m[field].get<int64_t>();
    };
    const int64_t start = integer("start_step", 0), interval = integer("step_interval", 1);
    LG_INPUT_CHECK(interval >= 1, "{}: metric '{}': step_interval {} must be >= 1", name, key, interval);
    for (size_t i = 0; i < values.size(); ++i)
      out.emplace_back(start + static_cast<int64_t>(i) * interval, &values[i]);
    return out;
  }
  for (auto v = values.begin(); v != values.end(); ++v) {
    std::optional<int64_t> step = parse_int(v.key());
    LG_INPUT_CHECK(step.has_value(), "{}: metric '{}': step '{}' is not an integer", name, key, v.key());
    out.emplace_back(*step, &*v);
  }
  return out;
}

}  // namespace

RunLog golden_values_run(const nlohmann::json& golden, const std::string& name) {
  RunLog log;
  log.path = name;
  log.kind = RunKind::kGoldenValues;
  LG_INPUT_CHECK(golden.is_object(), "{}: golden values must be a JSON object of metrics", name);
  std::map<int64_t, RunEntry> by_step;
  for (auto m = golden.begin(); m != golden.end(); ++m) {
    const std::string& key = m.key();
    if (m->is_number()) continue;  // a run-wide summary of older files (iteration_timing_avg), not a step
    LG_INPUT_CHECK(m->is_object() && m->contains("values") && ((*m)["values"].is_object() || (*m)["values"].is_array()),
                   "{}: metric '{}' has no \"values\" object or list", name, key);
    const nlohmann::json* hexes = m->contains("values_hex") ? &(*m)["values_hex"] : nullptr;
    for (const auto& [step, v] : metric_steps(*m, key, name)) {
      if (not_recorded(*v)) continue;
      std::string text = v->is_string() ? v->get<std::string>() : v->dump();
      std::optional<double> value = v->is_number() || v->is_string() ? parse_double(text) : std::nullopt;
      LG_INPUT_CHECK(value.has_value(), "{}: metric '{}' step {}: value {} is not a number", name, key, step,
                     v->dump());
      LoggedValue lv{*value, text, false};
      const std::string step_key = std::to_string(step);
      if (hexes && hexes->contains(step_key)) {
        const nlohmann::json& h = (*hexes)[step_key];
        try {
          lv = exact_value(from_hex(h.is_string() ? h.get<std::string>() : h.dump()));
        } catch (const InputError& e) {
          throw InputError(fmt::format("{}: metric '{}' step {}: values_hex: {}", name, key, step, e.what()));
        }
      }
      RunEntry& e = by_step[step];
      e.iteration = step;
      if (key == "lm loss") e.lm_loss = lv;
      else if (key == "params-norm") e.params_norm = lv;
      else if (key == "grad-norm") e.grad_norm = lv;
      else if (key == "num-zeros") e.num_zeros = lv;
      else if (key == "learning-rate") e.learning_rate = lv;
      else if (key == "loss-scale") e.loss_scale = lv;
      else if (key == "iteration-time") e.elapsed_ms = lv.value * 1000.0;  // TensorBoard's is in seconds
      else e.other[key] = text;
    }
  }
  for (auto& [step, e] : by_step) log.entries.push_back(std::move(e));
  LG_INPUT_CHECK(!log.entries.empty(), "{}: golden values with no recorded step (every value absent or \"nan\")",
                 name);
  return log;
}

// ---- loopgate Traces ----

RunLog trace_run(const Trace& trace, const std::string& name) {
  RunLog log;
  log.path = name;
  log.kind = RunKind::kTrace;
  for (const IterationRecord& r : trace.records) log.last_rank = std::max(log.last_rank, r.rank);
  LG_INPUT_CHECK(log.last_rank >= 0, "{}: a Trace with no records", name);
  std::vector<const IterationRecord*> recs;
  for (int64_t it : trace.iterations())
    if (const IterationRecord* r = trace.find(it, log.last_rank)) recs.push_back(r);
  // Intervals of the interval-time timer in sequence order; interval k is the window that ends at log point k
  // (the timer starts before iteration 1 and is stopped and restarted at every log point's read).
  std::map<int64_t, double> interval_seconds;
  for (const IterationRecord* r : recs)
    for (const TimerInterval& t : r->timer_intervals)
      if (t.name == "interval-time") interval_seconds[t.seq] = t.seconds;
  int64_t log_points = 0, previous_point = 0;
  for (const IterationRecord* r : recs) {
    RunEntry e;
    e.iteration = r->iteration;
    e.skipped_iterations = r->skipped ? 1 : 0;
    e.nan_iterations = r->nan ? 1 : 0;
    // Traces since the timer_window field mark log points; older ones: iteration 1 and reports of intervals.
    const bool log_point =
        r->timer_window_first > 0 || r->iteration == 1 || !r->timer_intervals.empty();
    if (log_point) {
      // Present where the log line prints it (format_log_line's has_*: Megatron drops a NaN or negative loss
      // average, a skipped step's grad norm); a Trace holds NaN for a value that was not logged.
      auto printed = [](double v, bool nonnegative) {
        return std::isfinite(v) && (!nonnegative || v >= 0.0) ? std::optional<LoggedValue>(exact_value(v)) : std::nullopt;
      };
      e.lm_loss = printed(r->lm_loss, true);
      e.params_norm = printed(r->params_norm, false);
      e.grad_norm = printed(r->grad_norm, true);
      e.num_zeros = printed(r->num_zeros, true);
      e.learning_rate = exact_value(r->learning_rate);
      e.loss_scale = exact_value(r->loss_scale);
      e.other["consumed samples"] = std::to_string(r->consumed_samples);
      auto window = interval_seconds.find(log_points);
      if (window != interval_seconds.end())
        e.elapsed_ms = window->second * 1000.0 / static_cast<double>(r->iteration - previous_point);
      ++log_points;
      previous_point = r->iteration;
    }
    log.entries.push_back(std::move(e));
  }
  return log;
}

// ---- detection ----

namespace {

// Megatron's inference tests record per request ("0", "1", ...: generated_text, generated_tokens, logprobs) or a
// single request at the top level, beside throughput and memory: no step of a training run.
bool inference_golden(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  static const char* kFields[] = {"generated_text", "generated_tokens", "logprobs", "throughput"};
  auto has_field = [&](const nlohmann::json& o) {
    return o.is_object() && std::any_of(std::begin(kFields), std::end(kFields), [&](const char* f) {
             return o.contains(f);
           });
  };
  if (has_field(j)) return true;
  return std::any_of(j.begin(), j.end(), has_field);
}

}  // namespace

RunLog read_run(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LG_INPUT_CHECK(in.good(), "{}: cannot open the file (missing?)", path);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const size_t first = text.find_first_not_of(" \t\r\n");
  LG_INPUT_CHECK(first != std::string::npos, "{}: empty file: no Megatron log line, golden values or Trace", path);
  if (first != std::string::npos && text[first] == '{') {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    LG_INPUT_CHECK(!j.is_discarded(), "{}: starts like JSON but does not parse as JSON", path);
    if (j.contains("records")) {
      try {
        return trace_run(trace_from_json(j), path);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", path, e.what()));
      }
    }
    LG_INPUT_CHECK(!(j.is_object() && j.empty()), "{}: golden values with no metric (an empty {{}}): nothing to "
                                                  "compare", path);
    bool metrics = false;
    for (const auto& v : j) metrics = metrics || (v.is_object() && v.contains("values"));
    LG_INPUT_CHECK(metrics || !inference_golden(j), "{}: Megatron inference golden values (generated tokens, logprobs "
                                                    "or throughput per request), not training metrics: not compared",
                   path);
    LG_INPUT_CHECK(metrics, "{}: JSON, but neither a loopgate Trace (no \"records\") nor Megatron golden values (no "
                            "metric with \"values\")", path);
    return golden_values_run(j, path);
  }
  RunLog log = parse_megatron_log(text, path);  // malformed iteration lines throw file:line first
  return log;
}

// ---- comparing logged values ----

std::string format_like(double v, const std::string& printed) {
  const PrintedForm f = printed_form(printed);
  if (!f.ok) return fmt::format("{}", v);
  if (f.sci) return f.upper ? fmt::format("{:.{}E}", v, f.decimals) : fmt::format("{:.{}e}", v, f.decimals);
  return fmt::format("{:.{}f}", v, f.decimals);
}

bool same_logged_value(const LoggedValue& a, const LoggedValue& b) {
  if (a.exact && b.exact) return same_bits(a.value, b.value);
  const bool fa = std::isfinite(a.value), fb = std::isfinite(b.value);
  if (!fa || !fb) return !fa && !fb && ((std::isnan(a.value) && std::isnan(b.value)) || a.value == b.value);
  const PrintedForm pa = printed_form(a.text), pb = printed_form(b.text);
  if (!a.exact && !b.exact && (!pa.ok || !pb.ok)) return a.text == b.text;
  // The coarser side's text is the common precision; an exact value is the finest.
  const bool a_coarser = b.exact || (!a.exact && pa.ok && (!pb.ok || pa.quantum_exp >= pb.quantum_exp));
  const LoggedValue& coarse = a_coarser ? a : b;
  const LoggedValue& fine = a_coarser ? b : a;
  return format_like(fine.value, coarse.text) == coarse.text;
}

std::string printed_format(const LoggedValue& v) {
  if (v.exact) return "exact bits";
  const PrintedForm f = printed_form(v.text);
  if (!f.ok) return "as printed";
  return fmt::format("%.{}{}", f.decimals, f.sci ? (f.upper ? "E" : "e") : "f");
}

}  // namespace loopgate
