// Unit tests for the parsers the fuzz targets cover (suites/fuzz, docs/fuzzing.md), in the ordinary build: every
// regression input in suites/fuzz/corpus/*/regression-* is handled right by the reader it once broke (refused with
// InputError, or the right verdict), so CTest keeps them fixed without a fuzz run and the cpu-asan build replays
// them; the table below names every such file; and the real golden/ files are accepted whole.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 expects each regression input to be accepted and the golden files
// to be refused, so every test here fails.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "fixtures/faults/fault_spec.h"
#include "fixtures/golden.h"
#include "suites/unit/wrong.h"
#include "trainer/capture/capture.h"
#include "trainer/common/error.h"
#include "trainer/loop/trace.h"

namespace loopgate {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

fs::path corpus_dir() { return fs::path(__FILE__).parent_path().parent_path() / "fuzz" / "corpus"; }

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json golden_file(const std::string& name) { return read_json_file(default_golden_dir() + "/" + name); }

std::map<std::string, std::string> env_map(const json& env) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : env.items()) out[k] = v.get<std::string>();
  return out;
}

// The golden values check with `text` as the golden values file (env: golden/single's, matching).
void as_golden_values(const std::string& text) {
  const json env = golden_file("single/environment_cpu.json");
  const json j = parse_json_text(text, "input");
  check_golden_values(j, env, j, env_map(env));
}

void as_environment(const std::string& text) {
  const json values = golden_file("single/golden_values_cpu.json");
  check_golden_values(values, parse_json_text(text, "input"), values,
                      env_map(golden_file("single/environment_cpu.json")));
}

// An environment file with a key absent here: the environments differ.
bool environment_differs(const std::string& text) {
  const json values = golden_file("single/golden_values_cpu.json");
  return !check_golden_values(values, parse_json_text(text, "input"), values,
                              env_map(golden_file("single/environment_cpu.json")))
              .environment_matches;
}

void as_lr_sequences(const std::string& text) { golden_lr_sequence(parse_json_text(text, "input"), "c", 16); }

void as_budget(const std::string& text) {
  find_sync_budget(parse_json_text(text, "input"), "tp2sp", "log_interval_1", "baseline");
}

// A reader that must refuse the input: true when it throws InputError (any other exception fails the test).
std::function<bool(const std::string&)> refused(std::function<void(const std::string&)> read) {
  return [read](const std::string& t) {
    try {
      read(t);
      return false;
    } catch (const InputError&) {
      return true;
    }
  };
}

// Each regression input (path under suites/fuzz/corpus/) and what handling it right means: refused with InputError
// by the reader it once broke, or for a wrong verdict, the right verdict (fix commits: docs/fuzzing.md).
const std::map<std::string, std::function<bool(const std::string&)>>& regressions() {
  static const std::map<std::string, std::function<bool(const std::string&)>> r = {
      {"capture_spec/regression-iteration-overflow", refused([](const std::string& t) { parse_capture_spec(t); })},
      {"fault_spec/regression-nul-in-integer", refused([](const std::string& t) { parse_fault_specs(t); })},
      {"golden_values/regression-environment-not-string", refused(as_environment)},
      {"golden_values/regression-environment-absent-sentinel", environment_differs},
      {"golden_values/regression-step-not-integer", refused(as_golden_values)},
      {"golden_values/regression-metric-shape", refused(as_golden_values)},
      {"golden_values/regression-lr-no-by-global-batch", refused(as_lr_sequences)},
      {"golden_values/regression-lr-value-not-string", refused(as_lr_sequences)},
      {"sync_budgets/regression-missing-category", refused(as_budget)},
      {"sync_budgets/regression-negative-budget", refused(as_budget)},
      {"sync_budgets/regression-float-budget", refused(as_budget)},
      {"sync_budgets/regression-category-not-object", refused(as_budget)},
      {"trace/regression-world-float-overflow", refused([](const std::string& t) { trace_from_string(t); })},
      {"trace/regression-iteration-1e300", refused([](const std::string& t) { trace_from_string(t); })},
      {"trace/regression-site-count-float", refused([](const std::string& t) { trace_from_string(t); })},
      {"trace/regression-collective-groups-number", refused([](const std::string& t) { trace_from_string(t); })},
  };
  return r;
}

TEST(ParserRegressions, EachRegressionInputIsHandled) {
  for (const auto& [name, handled] : regressions()) {
    const fs::path p = corpus_dir() / name;
    ASSERT_TRUE(fs::exists(p)) << p;
    EXPECT_NE(handled(file_text(p)), wrong() == 1) << name;
  }
}

TEST(ParserRegressions, TheTableNamesEveryRegressionFile) {
  std::set<std::string> on_disk;
  for (const auto& e : fs::recursive_directory_iterator(corpus_dir()))
    if (e.is_regular_file() && e.path().filename().string().rfind("regression-", 0) == 0)
      on_disk.insert(fs::relative(e.path(), corpus_dir()).string());
  std::set<std::string> listed;
  for (const auto& [name, handled] : regressions()) listed.insert(name);
  if (wrong()) listed.insert("trace/regression-not-on-disk");
  EXPECT_EQ(on_disk, listed);
}

// ---- the real files are accepted whole ----

TEST(GoldenFiles, EveryFixturesValuesPassAgainstThemselves) {
  for (const char* fx : {"single", "tp2sp", "pp2", "pp2tp2dp2", "dp64"}) {
    json values = golden_file(std::string(fx) + "/golden_values_cpu.json");
    const json env = golden_file(std::string(fx) + "/environment_cpu.json");
    if (wrong()) values["lm loss"]["values_hex"]["1"] = 1.0;
    GoldenCheck gc;
    EXPECT_NO_THROW(gc = check_golden_values(values, env, values, env_map(env))) << fx;
    EXPECT_TRUE(gc.environment_matches) << fx;
    EXPECT_TRUE(gc.failures.empty()) << fx << ": " << (gc.failures.empty() ? "" : gc.failures[0]);
  }
}

TEST(GoldenFiles, SyncBudgetsCoverEveryFixtureScenarioAndArm) {
  json budgets = golden_file("sync_budgets.json");
  if (wrong()) budgets["fixtures"]["pp2"]["scenarios"]["log_interval_3"]["arms"]["onesync"].erase("nonlog");
  for (const char* fx : {"single", "tp2sp", "pp2", "pp2tp2dp2", "dp64"})
    for (const SyncScenario& s : sync_scenarios(fx))
      for (const std::string& arm : budget_arms()) {
        const json* b = nullptr;
        EXPECT_NO_THROW(b = find_sync_budget(budgets, fx, s.key, arm)) << fx << " " << s.key << " " << arm;
        EXPECT_NE(b, nullptr) << fx << " " << s.key << " " << arm;
      }
}

TEST(GoldenFiles, LrSequencesHaveEveryCaseAndBatch) {
  const json lr = golden_file("lr_sequences.json");
  for (const LrCase& c : lr_cases())
    for (int64_t gbs : fixture_global_batches())
      EXPECT_EQ(golden_lr_sequence(lr, c.name, gbs).size(), static_cast<size_t>(kLrIterations + wrong()))
          << c.name << " " << gbs;
}

}  // namespace
}  // namespace loopgate
