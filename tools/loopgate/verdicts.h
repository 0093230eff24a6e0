// The gate's verdicts and the verdict table (fixture x check x arm), shared by `loopgate gate` (a text table on
// stdout, --json) and `loopgate report` (the same table in HTML, read back from that JSON), so both show the
// same cells. Not here: launching the suites (gate.cpp) or drawing anything (report.cpp, svg.cpp).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace loopgate {

// check name -> GoogleTest suite name (TEST_P suites are instantiated as "Arms/<Suite>"), in table order.
const std::vector<std::pair<std::string, std::string>>& gate_checks();
// Checks only a GPU runs, from the GPU-only suites executable (suites/gpu/test_gpu_loop.cpp).
bool gpu_only_check(const std::string& check);

// Candidate-arm tests carry their arm; arm-independent tests are "(all)"; GatePower tests "(planted defect)".
inline const char* const kAllArms = "(all)";
inline const char* const kPlantedDefect = "(planted defect)";

struct Verdict {
  std::string fixture, check, arm, test;
  bool passed = false;
  std::string message;
};

// One Trace a fixture's launch wrote (--lg_trace_dir): its scenario key, arm and file.
struct TraceFile {
  std::string scenario, arm, path;
};

struct FixtureRun {
  std::string fixture;
  int np = 0;
  int exit_code = 0;  // of the last launch; non-zero also when an earlier launch of the fixture was aborted
  double seconds = 0;
  std::string log_path;
  int launches = 0;                 // 1, plus one relaunch per test a launch was aborted in
  std::vector<std::string> aborted;  // tests a launch was aborted in (hang, throw, MPI error), in order
  std::vector<Verdict> verdicts;
  std::vector<Verdict> skipped;  // tests that skipped themselves, with their reason: never counted as passed
  std::vector<TraceFile> traces;
};

// One row of the table. `cells` follow the arms passed to verdict_rows(); each is "PASS", "FAIL k/n" or "-"
// (no test of that arm ran); `defect` is "REJECTED", "ACCEPTED!" or "-".
struct VerdictRow {
  std::string fixture, check, baseline;
  std::vector<std::string> cells;
  std::string defect;
};

// "baseline" holds a check's arm-independent tests; an arm's cell counts its own tests plus those ("-" when none
// of its own ran: the heavy fixtures run fewer arms), never a borrowed PASS.
std::vector<VerdictRow> verdict_rows(const std::vector<FixtureRun>& runs, const std::vector<std::string>& arms);

// The --json document of `loopgate gate` and its inverse (malformed -> InputError naming the field).
struct GateSummary {
  bool ok = false;
  std::string started_at;          // UTC, ISO 8601
  double seconds = 0;
  std::vector<std::string> arms;   // the candidate arms (table columns)
  std::vector<FixtureRun> runs;
};
nlohmann::json gate_to_json(const GateSummary& g);
// Now, UTC, ISO 8601 ("2025-01-31T12:00:00Z"): the gate's started_at, the report's generated_at.
std::string utc_now();
GateSummary gate_from_json(const nlohmann::json& j);

// JUnit XML: a testsuite per fixture, a testcase per verdict (a launch that failed with none: one failed case).
void write_junit(const std::string& path, const std::vector<FixtureRun>& runs);

}  // namespace loopgate
