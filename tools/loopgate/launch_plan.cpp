// The launch plan of `loopgate gate` (launch_plan.h).
#include "tools/loopgate/launch_plan.h"

#include <algorithm>
#include <map>

#include "tools/loopgate/verdicts.h"

namespace loopgate {

std::string gtest_filter(const std::vector<std::string>& wanted) {
  if (wanted.empty()) return "*";
  std::string filter;
  for (const std::string& w : wanted) {
    std::string suite;
    for (const auto& [check, s] : gate_checks())
      if (check == w) suite = s;
    // "Timers*": a gate's suites share its name as a prefix (Timers, TimersLagged), as check_of_suite reads them.
    for (const std::string& part :
         {"Arms/" + suite + "*", suite + "*", "GatePower." + suite + "*", "GatePower/" + suite + "*"})
      filter += (filter.empty() ? "" : ":") + part;
  }
  return filter;
}

std::vector<LaunchUnit> launch_units(const GateOptions& o, const std::vector<Fixture>& fixtures) {
  auto asked = [&](const std::string& check) {
    return o.checks.empty() || std::find(o.checks.begin(), o.checks.end(), check) != o.checks.end();
  };
  const bool gate_suites_asked = o.checks.empty() || std::any_of(o.checks.begin(), o.checks.end(), [](const auto& c) {
                                   return !gpu_only_check(c);
                                 });
  const std::string gate_filter = o.filter.empty() ? gtest_filter(o.checks) : o.filter;
  std::vector<LaunchUnit> units;
  for (const Fixture& f : fixtures) {
    if (gate_suites_asked) units.push_back({f, o.suites_exe, gate_filter, "", o.device});
    if (o.device != "cuda") continue;
    for (const auto& [check, suite] : gate_checks())
      if (gpu_only_check(check) && asked(check))
        units.push_back({f, o.gpu_loop_exe, o.filter.empty() ? "*" + suite + "*" : o.filter, "." + check, "cpu"});
  }
  return units;
}

std::vector<std::string> parse_test_list(const std::string& out) {
  std::vector<std::string> tests;
  std::string suite;
  size_t at = 0;
  while (at < out.size()) {
    size_t nl = out.find('\n', at);
    if (nl == std::string::npos) nl = out.size();
    std::string line = out.substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) continue;
    if (line.rfind("  ", 0) == 0) {  // "  Name  # GetParam() = ..."
      if (suite.empty()) continue;
      line = line.substr(2, line.find("  #") == std::string::npos ? std::string::npos : line.find("  #") - 2);
      if (!line.empty() && line.find(' ') == std::string::npos) tests.push_back(suite + line);
    } else {
      suite = line.back() == '.' && line.find(' ') == std::string::npos ? line : "";  // "Suite." (not a log line)
    }
  }
  return tests;
}

// The group a test's scenarios belong to: a candidate-arm test's arm ("Arms/Suite.Name/arm"), else its suite. The
// tests of one arm share that arm's scenarios across suites; the baseline's runs, which every arm compares
// against, are the only ones two shards repeat.
std::string shard_group(const std::string& test) {
  if (test.rfind("Arms/", 0) == 0) {
    const size_t slash = test.rfind('/');
    if (slash != std::string::npos && slash > 4) return "arm " + test.substr(slash + 1);
  }
  return "suite " + test.substr(0, test.find('.'));
}

std::vector<LaunchUnit> split_unit(const LaunchUnit& u, const std::vector<std::string>& tests, int shards) {
  std::map<std::string, size_t> group_index;  // numbered in order of first appearance
  for (const std::string& t : tests) group_index.emplace(shard_group(t), group_index.size());
  const int n = std::max(1, std::min(shards, static_cast<int>(group_index.size())));
  if (n == 1) return {u};
  std::vector<LaunchUnit> out(static_cast<size_t>(n), u);
  for (int k = 0; k < n; ++k) {
    out[k].shard = k;
    out[k].shards = n;
    out[k].filter.clear();
  }
  for (const std::string& t : tests) {
    std::string& f = out[group_index.at(shard_group(t)) % static_cast<size_t>(n)].filter;
    f += (f.empty() ? "" : ":") + t;
  }
  return out;
}

bool assign_gpus(std::vector<LaunchUnit>* shards, const std::vector<std::string>& visible, int ranks) {
  if (ranks < 1 || visible.size() < static_cast<size_t>(ranks)) return false;
  const size_t blocks = visible.size() / static_cast<size_t>(ranks);
  for (size_t k = 0; k < shards->size(); ++k) {
    const size_t b = k % blocks;
    std::string ids;
    for (int r = 0; r < ranks; ++r) ids += (r ? "," : "") + visible[b * static_cast<size_t>(ranks) + r];
    (*shards)[k].gpus = ids;
  }
  return true;
}

}  // namespace loopgate
