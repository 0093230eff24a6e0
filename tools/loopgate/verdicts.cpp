// The verdict table's cells and the gate's JSON document (verdicts.h). The cell rules live here once, so the
// text table of `loopgate gate` and the HTML table of `loopgate report` cannot disagree. Not here: reading
// GoogleTest's JSON (gate.cpp) or any HTML (report.cpp).
#include "tools/loopgate/verdicts.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>

#include "tools/loopgate/svg.h"
#include "trainer/common/error.h"

namespace loopgate {

const std::vector<std::pair<std::string, std::string>>& gate_checks() {
  static const std::vector<std::pair<std::string, std::string>> c = {
      {"equivalence", "Equivalence"}, {"distributional", "Distributional"}, {"lr_schedule", "LrSchedule"},
      {"nan_detection", "NanDetection"}, {"timers", "Timers"},           {"logging_exit", "LoggingExit"},
      {"sync_budget", "SyncBudget"},   {"loop_code", "LoopCode"},         {"schedule", "Schedule"},
      {"fp16", "Fp16"},                {"cuda_graph", "CudaGraph"},       {"isolation", "Isolation"},
      {"races", "Races"},              {"collectives", "Collectives"},     {"run_features", "RunFeatures"},
      {"resume", "Resume"},
      {"golden_values", "GoldenValues"}, {"ledger_cupti", "LedgerEqualsCupti"}, {"capture_probe", "CaptureProbe"}};
  return c;
}

bool gpu_only_check(const std::string& check) { return check == "ledger_cupti" || check == "capture_probe"; }

// ---- the table ----

namespace {

struct Tally {
  int passed = 0, total = 0;
};

std::string verdict_text(int passed, int total) {
  return passed == total ? std::string("PASS") : fmt::format("FAIL {}/{}", total - passed, total);
}

// Rows for one fixture's `check`, or nothing when no test of that check ran (a check can hold a failing
// non-gate test as "other"; it is listed after the known checks).
bool make_row(const FixtureRun& r, const std::string& check, const std::vector<std::string>& arms, VerdictRow* row) {
  std::map<std::string, Tally> cell;  // arm -> tally
  for (const Verdict& v : r.verdicts) {
    if (v.check != check) continue;
    Tally& t = cell[v.arm];
    t.passed += v.passed;
    t.total += 1;
  }
  if (cell.empty()) return false;
  auto all = cell.find(kAllArms);
  row->fixture = r.fixture;
  row->check = check;
  row->baseline = all == cell.end() ? "-" : verdict_text(all->second.passed, all->second.total);
  for (const std::string& a : arms) {
    auto own = cell.find(a);
    if (own == cell.end()) {
      row->cells.push_back("-");
      continue;
    }
    Tally t = own->second;
    if (all != cell.end()) {
      t.passed += all->second.passed;
      t.total += all->second.total;
    }
    row->cells.push_back(verdict_text(t.passed, t.total));
  }
  auto d = cell.find(kPlantedDefect);
  row->defect = d == cell.end() ? "-" : (d->second.passed == d->second.total ? "REJECTED" : "ACCEPTED!");
  return true;
}

}  // namespace

std::vector<VerdictRow> verdict_rows(const std::vector<FixtureRun>& runs, const std::vector<std::string>& arms) {
  std::vector<VerdictRow> rows;
  std::vector<std::string> names;
  for (const auto& [check, suite] : gate_checks()) names.push_back(check);
  names.push_back("other");
  // Then any other check a run holds, in its order (`loopgate pair`'s rows).
  for (const FixtureRun& r : runs)
    for (const Verdict& v : r.verdicts)
      if (std::find(names.begin(), names.end(), v.check) == names.end()) names.push_back(v.check);
  for (const FixtureRun& r : runs) {
    for (const std::string& check : names) {
      VerdictRow row;
      if (make_row(r, check, arms, &row)) rows.push_back(row);
    }
  }
  return rows;
}

// ---- JSON ----

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json gate_to_json(const GateSummary& g) {
  nlohmann::json j;
  j["verdict"] = g.ok ? "pass" : "fail";
  j["started_at"] = g.started_at;
  j["seconds"] = g.seconds;
  j["arms"] = g.arms;
  j["fixtures"] = nlohmann::json::array();
  for (const FixtureRun& r : g.runs) {
    nlohmann::json f = {{"fixture", r.fixture}, {"np", r.np},   {"exit_code", r.exit_code}, {"seconds", r.seconds},
                        {"log", r.log_path},    {"verdicts", nlohmann::json::array()}, {"traces", nlohmann::json::array()},
                        {"launches", r.launches}, {"aborted", r.aborted}};
    for (const Verdict& v : r.verdicts)
      f["verdicts"].push_back({{"check", v.check}, {"arm", v.arm}, {"test", v.test}, {"passed", v.passed},
                               {"message", v.message}});
    for (const TraceFile& t : r.traces)
      f["traces"].push_back({{"scenario", t.scenario}, {"arm", t.arm}, {"path", t.path}});
    j["fixtures"].push_back(f);
  }
  return j;
}

namespace {

template <typename T>
T field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  LG_INPUT_CHECK(j.is_object() && j.contains(key), "gate JSON: {} has no field '{}'", where, key);
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("gate JSON: {} field '{}': {}", where, key, e.what()));
  }
}

}  // namespace

GateSummary gate_from_json(const nlohmann::json& j) {
  GateSummary g;
  const std::string verdict = field<std::string>(j, "verdict", "the document");
  LG_INPUT_CHECK(verdict == "pass" || verdict == "fail", "gate JSON: verdict '{}' is not pass|fail", verdict);
  g.ok = verdict == "pass";
  g.started_at = j.value("started_at", "");  // absent in gate JSON written before the report existed
  g.seconds = j.value("seconds", 0.0);
  for (const auto& f : field<nlohmann::json>(j, "fixtures", "the document")) {
    FixtureRun r;
    r.fixture = field<std::string>(f, "fixture", "a fixture");
    const std::string where = "fixture '" + r.fixture + "'";
    r.np = field<int>(f, "np", where);
    r.exit_code = field<int>(f, "exit_code", where);
    r.seconds = field<double>(f, "seconds", where);
    r.log_path = f.value("log", "");
    for (const auto& v : f.value("verdicts", nlohmann::json::array()))
      r.verdicts.push_back({r.fixture, field<std::string>(v, "check", where + " verdict"),
                            field<std::string>(v, "arm", where + " verdict"),
                            field<std::string>(v, "test", where + " verdict"),
                            field<bool>(v, "passed", where + " verdict"), v.value("message", "")});
    for (const auto& t : f.value("traces", nlohmann::json::array()))
      r.traces.push_back({field<std::string>(t, "scenario", where + " trace"),
                          field<std::string>(t, "arm", where + " trace"),
                          field<std::string>(t, "path", where + " trace")});
    g.runs.push_back(r);
  }
  if (j.contains("arms")) {
    g.arms = field<std::vector<std::string>>(j, "arms", "the document");
  } else {  // older documents: the candidate arms in order of appearance
    for (const FixtureRun& r : g.runs)
      for (const Verdict& v : r.verdicts)
        if (v.arm != kAllArms && v.arm != kPlantedDefect &&
            std::find(g.arms.begin(), g.arms.end(), v.arm) == g.arms.end())
          g.arms.push_back(v.arm);
  }
  return g;
}

// ---- JUnit ----

void write_junit(const std::string& path, const std::vector<FixtureRun>& runs) {
  std::ofstream x(path);
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"loopgate\">\n";
  for (const FixtureRun& r : runs) {
    int failures = 0;
    for (const Verdict& v : r.verdicts) failures += !v.passed;
    if (r.exit_code != 0 && failures == 0) failures = 1;
    x << fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" time=\"{:.1f}\">\n", r.fixture,
                     r.verdicts.size(), failures, r.seconds);
    for (const Verdict& v : r.verdicts) {
      x << fmt::format("    <testcase classname=\"{}.{}\" name=\"{}\">", r.fixture, v.check, html_escape(v.test));
      if (!v.passed) x << "<failure message=\"" << html_escape(v.message.substr(0, v.message.find('\n'))) << "\">"
                       << html_escape(v.message) << "</failure>";
      x << "</testcase>\n";
    }
    if (r.exit_code != 0 && r.verdicts.empty())
      x << fmt::format("    <testcase classname=\"{}\" name=\"launch\"><failure message=\"exit {}\">see {}</failure></testcase>\n",
                       r.fixture, r.exit_code, r.log_path);
    x << "  </testsuite>\n";
  }
  x << "</testsuites>\n";
}

}  // namespace loopgate
