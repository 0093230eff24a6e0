// Trace: exact-double encoding, comparison, JSON I/O.
#include "trainer/loop/trace.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "trainer/common/error.h"

namespace loopgate {

// ---- exact doubles ----

uint64_t double_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

bool same_bits(double a, double b) { return double_bits(a) == double_bits(b); }

std::string hex(double v) {
  char buf[64];
  if (std::isnan(v)) {
    std::snprintf(buf, sizeof buf, "nan(0x%016" PRIx64 ")", double_bits(v));
  } else {
    std::snprintf(buf, sizeof buf, "%a", v);
  }
  return buf;
}

double from_hex(const std::string& s) {
  if (s.rfind("nan(0x", 0) == 0 && s.size() == 6 + 16 + 1 && s.back() == ')') {
    errno = 0;
    char* end = nullptr;
    const unsigned long long bits = std::strtoull(s.c_str() + 6, &end, 16);
    LG_INPUT_CHECK(errno == 0 && end == s.c_str() + s.size() - 1, "not an exact double: '{}'", s);
    double v;
    const uint64_t b = bits;
    std::memcpy(&v, &b, sizeof v);
    LG_INPUT_CHECK(std::isnan(v), "not an exact double: '{}' (nan(...) bits are not a NaN)", s);
    return v;
  }
  LG_INPUT_CHECK(!s.empty() && s.find_first_of(" \t\n") == std::string::npos, "not an exact double: '{}'", s);
  // strtod also reads "nan", "nan(...)": only the exact-bits form above carries a NaN.
  LG_INPUT_CHECK(s.find("nan") == std::string::npos && s.find("NAN") == std::string::npos,
                 "not an exact double: '{}' (a NaN is written nan(0x<16 hex digits>))", s);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);  // ERANGE on denormals is not an error here
  LG_INPUT_CHECK(end == s.c_str() + s.size(), "not an exact double: '{}'", s);
  return v;
}

namespace {

// A file holds each double as its hex (exact) and decimal (for a reader) strings; the wire form, which ranks send
// each other and nobody reads, holds it as a MessagePack float64: the same 64 bits, without printing and parsing
// them (the gather's decode at dp64: docs/timings.md).
enum class Form { kFile, kWire };

nlohmann::json exact(double v, Form form = Form::kFile) {
  if (form == Form::kWire) return v;
  char dec[40];
  std::snprintf(dec, sizeof dec, "%.17g", v);
  return {{"hex", hex(v)}, {"dec", dec}};
}

// An integer, range-checked for Int: nlohmann's get<int64_t> / get<int> casts a float or an out-of-range value
// (undefined behaviour for a float past the range, e.g. 1e300 or 1.9e19; found by suites/fuzz/fuzz_trace).
template <class Int>
Int integer(const nlohmann::json& v, const std::string& key) {
  LG_INPUT_CHECK(v.is_number_integer(), "trace JSON: field '{}' is not an integer ({})", key,
                 v.is_number() ? v.dump() : v.type_name());
  const bool in_range = v.is_number_unsigned()
                            ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max())
                            : v.get<int64_t>() >= std::numeric_limits<Int>::min() &&
                                  v.get<int64_t>() <= std::numeric_limits<Int>::max();
  LG_INPUT_CHECK(in_range, "trace JSON: field '{}': {} is out of range", key, v.dump());
  return v.is_number_unsigned() ? static_cast<Int>(v.get<uint64_t>()) : static_cast<Int>(v.get<int64_t>());
}

// The member itself, not a copy: field<nlohmann::json> would copy the subtree (a whole Trace's records, once per
// rank's Trace and per rank at dp64's trace gather).
const nlohmann::json& member(const nlohmann::json& j, const char* key) {
  LG_INPUT_CHECK(j.is_object() && j.contains(key), "trace JSON: field '{}' is missing", key);
  return j.at(key);
}

template <class T>
T field(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = member(j, key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return integer<T>(v, key);
  } else {
    try {
      return v.get<T>();
    } catch (const nlohmann::json::exception& e) {
      LG_INPUT_CHECK(false, "trace JSON: field '{}': {}", key, e.what());
    }
    return T{};
  }
}

// reads_per_site: {site: count}, each count an integer (see integer()).
std::map<std::string, int64_t> site_counts(const nlohmann::json& j, const char* key) {
  const auto& counts = member(j, key);
  LG_INPUT_CHECK(counts.is_object(), "trace JSON: field '{}' is not an object", key);
  std::map<std::string, int64_t> out;
  for (const auto& [site, n] : counts.items()) out[site] = integer<int64_t>(n, std::string(key) + "." + site);
  return out;
}

double exact_field(const nlohmann::json& j, const char* key, Form form = Form::kFile) {
  const auto& v = member(j, key);
  if (form == Form::kWire) {
    LG_INPUT_CHECK(v.is_number_float(), "trace wire: field '{}' is not a float64", key);
    return v.get<double>();
  }
  LG_INPUT_CHECK(v.is_object() && v.contains("hex") && v.at("hex").is_string(),
                 "trace JSON: field '{}' has no hex string", key);
  return from_hex(v.at("hex").get<std::string>());
}

}  // namespace

// ---- the record ----

const char* verdict_phase_name(VerdictPhase phase) {
  return phase == VerdictPhase::kBeforeStep ? "before_step" : "after_step";
}

const IterationRecord* Trace::find(int64_t iteration, int rank) const {
  for (const auto& r : records)
    if (r.iteration == iteration && r.rank == rank) return &r;
  return nullptr;
}

std::vector<int64_t> Trace::iterations() const {
  std::vector<int64_t> out;
  for (const auto& r : records) out.push_back(r.iteration);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const std::vector<LoggedField>& logged_fields() {
  static const std::vector<LoggedField> f = {
      {"lm_loss", &IterationRecord::lm_loss},     {"params_norm", &IterationRecord::params_norm},
      {"grad_norm", &IterationRecord::grad_norm}, {"num_zeros", &IterationRecord::num_zeros},
      {"learning_rate", &IterationRecord::learning_rate}, {"loss_scale", &IterationRecord::loss_scale}};
  return f;
}

const double* logged_value(const IterationRecord& r, const std::string& name) {
  for (const LoggedField& f : logged_fields())
    if (name == f.name) return &(r.*f.member);
  return nullptr;
}

bool records_equal(const IterationRecord& a, const IterationRecord& b, std::string* why) {
  auto fail = [&](const std::string& m) {
    if (why) *why = fmt::format("iteration {} rank {}: {}", a.iteration, a.rank, m);
    return false;
  };
  if (a.iteration != b.iteration || a.rank != b.rank)
    return fail(fmt::format("key differs: ({}, {}) vs ({}, {})", a.iteration, a.rank, b.iteration, b.rank));
  for (const LoggedField& f : logged_fields())
    if (!same_bits(a.*f.member, b.*f.member))
      return fail(fmt::format("{}: {} vs {}", f.name, hex(a.*f.member), hex(b.*f.member)));
  if (a.skipped != b.skipped) return fail("skipped differs");
  if (a.nan != b.nan) return fail("nan differs");
  if (a.consumed_samples != b.consumed_samples) return fail("consumed_samples differs");
  if (a.timer_intervals.size() != b.timer_intervals.size()) return fail("timer interval count differs");
  for (size_t i = 0; i < a.timer_intervals.size(); ++i) {
    const auto &x = a.timer_intervals[i], &y = b.timer_intervals[i];
    if (x.name != y.name || x.seq != y.seq || !same_bits(x.seconds, y.seconds))
      return fail(fmt::format("timer interval {}: {}#{}={} vs {}#{}={}", i, x.name, x.seq, hex(x.seconds), y.name,
                              y.seq, hex(y.seconds)));
  }
  if (a.timer_window_first != b.timer_window_first || a.timer_window_last != b.timer_window_last)
    return fail("timer_window differs");
  if (a.reads_per_site != b.reads_per_site) return fail("reads_per_site differs");
  if (a.launches_per_site != b.launches_per_site) return fail("launches_per_site differs");
  if (a.fault_verdicts != b.fault_verdicts) return fail("fault_verdicts differ");
  if (a.schedule != b.schedule) return fail(fmt::format("schedule: '{}' vs '{}'", a.schedule, b.schedule));
  if (a.param_checksum_before != b.param_checksum_before) return fail("param_checksum_before differs");
  if (a.param_checksum_after != b.param_checksum_after) return fail("param_checksum_after differs");
  if (a.exit_decision != b.exit_decision) return fail("exit_decision differs");
  if (a.collective_groups != b.collective_groups) return fail("collective_groups differ");
  if (a.collectives.size() != b.collectives.size())
    return fail(fmt::format("collectives: {} vs {} calls", a.collectives.size(), b.collectives.size()));
  for (size_t i = 0; i < a.collectives.size(); ++i)
    if (a.collectives[i] != b.collectives[i])
      return fail(fmt::format("collective {}: '{}' vs '{}'", i, to_string(a.collectives[i]), to_string(b.collectives[i])));
  if (a.coord != b.coord) return fail("coord differs");
  if (a.digests.size() != b.digests.size())
    return fail(fmt::format("digests: {} vs {}", a.digests.size(), b.digests.size()));
  for (size_t i = 0; i < a.digests.size(); ++i)
    if (!(a.digests[i] == b.digests[i]))
      return fail(fmt::format("digest {}: '{}' vs '{}'", i, to_string(a.digests[i]), to_string(b.digests[i])));
  return true;
}

bool traces_equal(const Trace& a, const Trace& b, std::string* why) {
  auto fail = [&](const std::string& m) {
    if (why) *why = m;
    return false;
  };
  if (a.arm != b.arm || a.fixture != b.fixture || a.world != b.world) return fail("header (arm, fixture, world) differs");
  if (a.environment != b.environment) return fail("environment differs");
  if (a.records.size() != b.records.size())
    return fail(fmt::format("record count {} vs {}", a.records.size(), b.records.size()));
  for (size_t i = 0; i < a.records.size(); ++i)
    if (!records_equal(a.records[i], b.records[i], why)) return false;
  return true;
}

// ---- JSON ----

namespace {

nlohmann::json record_json(const IterationRecord& r, Form form) {
  nlohmann::json j;
  j["iteration"] = r.iteration;
  j["rank"] = r.rank;
  for (const LoggedField& f : logged_fields()) j[f.name] = exact(r.*f.member, form);
  j["skipped"] = r.skipped;
  j["nan"] = r.nan;
  j["consumed_samples"] = r.consumed_samples;
  j["timer_intervals"] = nlohmann::json::array();
  for (const auto& iv : r.timer_intervals)
    j["timer_intervals"].push_back({{"name", iv.name}, {"seq", iv.seq}, {"seconds", exact(iv.seconds, form)}});
  j["timer_window"] = {r.timer_window_first, r.timer_window_last};
  j["reads_per_site"] = r.reads_per_site;
  if (!r.launches_per_site.empty()) j["launches_per_site"] = r.launches_per_site;
  j["fault_verdicts"] = nlohmann::json::array();
  for (const auto& v : r.fault_verdicts)
    j["fault_verdicts"].push_back(
        {{"iteration", v.iteration}, {"phase", verdict_phase_name(v.phase)}, {"action", v.action}});
  if (!r.schedule.empty()) j["schedule"] = r.schedule;
  // uint64 as hex strings in a file: JSON readers in other languages lose integers above 2^53.
  if (form == Form::kWire) {
    j["param_checksum_before"] = r.param_checksum_before;
    j["param_checksum_after"] = r.param_checksum_after;
  } else {
    j["param_checksum_before"] = fmt::format("0x{:016x}", r.param_checksum_before);
    j["param_checksum_after"] = fmt::format("0x{:016x}", r.param_checksum_after);
  }
  j["exit_decision"] = r.exit_decision;
  if (!r.collective_groups.empty()) j["collective_groups"] = r.collective_groups;
  if (!r.collectives.empty()) {
    j["collectives"] = nlohmann::json::array();
    for (const CollectiveCall& c : r.collectives) j["collectives"].push_back(to_string(c));
  }
  if (!r.coord.empty()) j["coord"] = r.coord;
  if (!r.digests.empty()) {
    j["digests"] = nlohmann::json::array();
    for (const DigestRecord& d : r.digests) j["digests"].push_back(to_string(d));
  }
  return j;
}

uint64_t checksum_field(const nlohmann::json& j, const char* key, Form form) {
  if (form == Form::kWire) {
    LG_INPUT_CHECK(member(j, key).is_number_unsigned(), "trace wire: field '{}' is not an unsigned integer", key);
    return member(j, key).get<uint64_t>();
  }
  const std::string s = field<std::string>(j, key);
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 16);
  LG_INPUT_CHECK(s.rfind("0x", 0) == 0 && errno == 0 && end == s.c_str() + s.size(),
                 "trace JSON: field '{}': '{}' is not a 0x-hex checksum", key, s);
  return v;
}

IterationRecord record_from(const nlohmann::json& j, Form form) {
  IterationRecord r;
  r.iteration = field<int64_t>(j, "iteration");
  r.rank = field<int>(j, "rank");
  for (const LoggedField& f : logged_fields()) r.*f.member = exact_field(j, f.name, form);
  r.skipped = field<bool>(j, "skipped");
  r.nan = field<bool>(j, "nan");
  r.consumed_samples = field<int64_t>(j, "consumed_samples");
  for (const auto& iv : member(j, "timer_intervals"))
    r.timer_intervals.push_back({field<std::string>(iv, "name"), field<int64_t>(iv, "seq"), exact_field(iv, "seconds", form)});
  if (j.contains("timer_window")) {  // absent in Traces written before it existed
    const nlohmann::json& w = j.at("timer_window");
    LG_INPUT_CHECK(w.is_array() && w.size() == 2, "trace JSON: field 'timer_window' must be [first, last]");
    r.timer_window_first = integer<int64_t>(w[0], "timer_window[0]");
    r.timer_window_last = integer<int64_t>(w[1], "timer_window[1]");
  }
  r.reads_per_site = site_counts(j, "reads_per_site");
  if (j.contains("launches_per_site")) r.launches_per_site = site_counts(j, "launches_per_site");
  for (const auto& v : member(j, "fault_verdicts")) {
    const std::string phase = field<std::string>(v, "phase");
    LG_INPUT_CHECK(phase == "before_step" || phase == "after_step",
                   "trace JSON: field 'phase': '{}' is not before_step|after_step", phase);
    r.fault_verdicts.push_back({field<int64_t>(v, "iteration"),
                                phase == "before_step" ? VerdictPhase::kBeforeStep : VerdictPhase::kAfterStep,
                                field<std::string>(v, "action")});
  }
  if (j.contains("schedule")) r.schedule = field<std::string>(j, "schedule");  // absent in older Traces
  r.param_checksum_before = checksum_field(j, "param_checksum_before", form);
  r.param_checksum_after = checksum_field(j, "param_checksum_after", form);
  r.exit_decision = field<bool>(j, "exit_decision");
  if (j.contains("collective_groups"))  // present with --record-collectives only
    for (const auto& g : member(j, "collective_groups")) {
      LG_INPUT_CHECK(g.is_string(), "trace JSON: field 'collective_groups' must hold strings, not {}", g.dump());
      r.collective_groups.push_back(g.get<std::string>());
    }
  if (j.contains("collectives"))
    for (const auto& c : member(j, "collectives")) {
      LG_INPUT_CHECK(c.is_string(), "trace JSON: field 'collectives' must hold strings, not {}", c.dump());
      r.collectives.push_back(parse_collective_call(c.get<std::string>()));
    }
  if (j.contains("coord")) r.coord = field<std::string>(j, "coord");  // present with --digests only
  if (j.contains("digests"))
    for (const auto& d : member(j, "digests")) {
      LG_INPUT_CHECK(d.is_string(), "trace JSON: field 'digests' must hold strings, not {}", d.dump());
      r.digests.push_back(parse_digest_record(d.get<std::string>(), r.iteration));
    }
  return r;
}

constexpr const char* kTraceFormat = "loopgate-trace/1";

nlohmann::json trace_json(const Trace& t, Form form) {
  nlohmann::json j;
  j["format"] = kTraceFormat;
  j["arm"] = t.arm;
  j["fixture"] = t.fixture;
  j["world"] = t.world;
  j["environment"] = t.environment;
  if (t.iterations_past_fault > 0) j["iterations_past_fault"] = t.iterations_past_fault;
  j["records"] = nlohmann::json::array();
  for (const auto& r : t.records) j["records"].push_back(record_json(r, form));
  return j;
}

Trace trace_from(const nlohmann::json& j, Form form) {
  const std::string format = field<std::string>(j, "format");
  LG_INPUT_CHECK(format == kTraceFormat, "trace JSON: format '{}' is not '{}'", format, kTraceFormat);
  Trace t;
  t.arm = field<std::string>(j, "arm");
  t.fixture = field<std::string>(j, "fixture");
  t.world = field<int>(j, "world");
  t.environment = field<std::map<std::string, std::string>>(j, "environment");
  if (j.contains("iterations_past_fault")) {
    t.iterations_past_fault = field<int64_t>(j, "iterations_past_fault");
    LG_INPUT_CHECK(t.iterations_past_fault >= 0, "trace JSON: iterations_past_fault {} < 0", t.iterations_past_fault);
  }
  for (const auto& r : member(j, "records")) t.records.push_back(record_from(r, form));
  return t;
}

}  // namespace

nlohmann::json to_json(const IterationRecord& r) { return record_json(r, Form::kFile); }
IterationRecord record_from_json(const nlohmann::json& j) { return record_from(j, Form::kFile); }
nlohmann::json to_json(const Trace& t) { return trace_json(t, Form::kFile); }
Trace trace_from_json(const nlohmann::json& j) { return trace_from(j, Form::kFile); }

std::string trace_to_string(const Trace& t, int indent) { return to_json(t).dump(indent); }

Trace trace_from_string(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    LG_INPUT_CHECK(false, "trace JSON does not parse: {}", e.what());
  }
  return trace_from_json(j);
}

void write_trace(const Trace& t, const std::string& path) {
  std::ofstream f(path);
  LG_INPUT_CHECK(f.good(), "cannot write trace to '{}'", path);
  f << trace_to_string(t) << "\n";
  LG_INPUT_CHECK(f.good(), "writing trace to '{}' failed", path);
}

std::vector<uint8_t> trace_to_wire(const Trace& t) { return nlohmann::json::to_msgpack(trace_json(t, Form::kWire)); }

Trace trace_from_wire(const uint8_t* first, size_t size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::from_msgpack(first, first + size);
  } catch (const nlohmann::json::exception& e) {
    LG_INPUT_CHECK(false, "trace wire bytes do not parse: {}", e.what());
  }
  return trace_from(j, Form::kWire);
}

Trace read_trace(const std::string& path) {
  std::ifstream f(path);
  LG_INPUT_CHECK(f.good(), "cannot read trace from '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return trace_from_string(ss.str());
}

}  // namespace loopgate
