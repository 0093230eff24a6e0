// The tools section of `loopgate selftest` (selftest_tools.h).
#include "tools/loopgate/selftest_tools.h"
#include "tools/loopgate/paths.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <cstdio>
#include <fstream>
#include <regex>

namespace loopgate {
namespace {

// One GoogleTest filter of the unit tests; its verdict from GoogleTest's own JSON report.
ToolSetResult unit_set(const ToolSetPaths& p, const std::string& set, const std::string& filter, const char* what) {
  ToolSetResult r{set, "", "", 0};
  if (access(p.unit_exe.c_str(), X_OK) != 0) {
    r.verdict = "not run (no " + p.unit_exe + ")";
    return r;
  }
  const std::string report = fmt::format("{}/{}.json", p.work_dir, std::regex_replace(set, std::regex("[^a-z]+"), "_"));
  int status = 0;
  command_output(fmt::format("'{}' '--gtest_filter={}' --gtest_output=json:{} > {}.log 2>&1", p.unit_exe, filter, report,
                      report),
          &status);
  std::ifstream in(report);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("tests")) {
    r.verdict = "FAIL";
    r.detail = fmt::format("no GoogleTest report (exit {}; {}.log)", status, report);
    return r;
  }
  const int tests = j.value("tests", 0), failures = j.value("failures", 0);
  std::string failed;
  for (const auto& suite : j.value("testsuites", nlohmann::json::array()))
    for (const auto& t : suite.value("testsuite", nlohmann::json::array()))
      if (t.contains("failures")) failed += (failed.empty() ? "" : ", ") + suite.value("name", "") + "." + t.value("name", "");
  r.verdict = tests > 0 && failures == 0 && status == 0 ? "PASS" : "FAIL";
  r.detail = fmt::format("{} of {} tests ({}){}", tests - failures, tests, what, failed.empty() ? "" : ": failed " + failed);
  return r;
}

ToolSetResult generated_rows(const ToolSetPaths& p) {
  ToolSetResult r{"CLI: bad input generated from the definitions", "", "", 0};
  const std::string script = p.source_dir + "/suites/cli/bad_input_generated.py";
  int status = 0;
  command_output("command -v python3 > /dev/null", &status);
  if (status != 0) {
    r.verdict = "not run (no python3)";
    return r;
  }
  if (access(script.c_str(), R_OK) != 0) {
    r.verdict = "not run (no " + script + ")";
    return r;
  }
  const std::string log = p.work_dir + "/bad_input_generated.log";
  const std::string out = command_output(fmt::format("python3 '{}' '{}' '{}' '{}' 2>&1 | tee {}", script, p.self_exe,
                                              p.mpiexec, p.source_dir, log),
                                  &status);
  std::smatch m;
  const std::regex summary(R"(generated bad input: (\d+) rows \(([^)]*)\), (\d+) failed)");
  if (!std::regex_search(out, m, summary)) {
    r.verdict = "FAIL";
    r.detail = "no summary line (" + log + ")";
    return r;
  }
  const int rows = std::stoi(m[1]), failed = std::stoi(m[3]);
  r.verdict = failed == 0 && rows > 0 ? "PASS" : "FAIL";
  r.detail = fmt::format("{} of {} rows ({}){}", rows - failed, rows, m[2].str(), failed ? "; see " + log : "");
  return r;
}

}  // namespace

std::vector<ToolSetResult> run_tool_sets(const ToolSetPaths& p) {
  struct Set {
    const char* name;
    std::function<ToolSetResult()> run;
  };
  const std::vector<Set> sets = {
      {"compare", [&] { return unit_set(p, "compare: field x input x window", "Inputs/KnownAnswers.*:KnownAnswersTable.*",
                                        "every judged field, 4 input kinds, inside and outside the early window"); }},
      {"ab", [&] { return unit_set(p, "ab: step-time statistics", "AbKnownAnswers.*",
                                   "ties, a constant side, too few windows, mixed time sources"); }},
      {"report", [&] { return unit_set(p, "report: gate JSON to HTML", "ReportTest.*:VerdictRows.*",
                                       "failed cells, a missing Trace, escaping"); }},
      {"cli", [&] { return generated_rows(p); }},
  };
  std::vector<ToolSetResult> out;
  for (const Set& s : sets) {
    const auto start = std::chrono::steady_clock::now();
    ToolSetResult r = s.run();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.push_back(r);
  }
  return out;
}

}  // namespace loopgate
