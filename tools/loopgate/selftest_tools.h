// `loopgate selftest`'s tools section: the known-answer sets of the tools around the gate, run beside the planted
// defects — compare's field matrix, ab's and report's known answers (unit tests of loopgate_unit) and the bad-input
// rows generated from the CLI's definitions (suites/cli/bad_input_generated.py). A set that cannot run here (the
// unit tests or the script not found, no python3) is "not run" with the reason, never a pass.
#pragma once
#include <string>
#include <vector>

namespace loopgate {

struct ToolSetResult {
  std::string set;      // "compare: field x input x window"
  std::string verdict;  // "PASS", "FAIL", "not run (...)"
  std::string detail;   // "52 of 52 known answers", the failing names
  double seconds = 0;
};

struct ToolSetPaths {
  std::string unit_exe;    // suites/loopgate_unit
  std::string self_exe;    // this loopgate (the generated rows run it)
  std::string mpiexec;
  std::string source_dir;  // the tree holding suites/cli/bad_input_generated.py
  std::string work_dir;    // where the sets write their reports
};

std::vector<ToolSetResult> run_tool_sets(const ToolSetPaths& p);

}  // namespace loopgate
