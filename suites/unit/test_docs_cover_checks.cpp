// docs/checks.md has a section for every check the gate runs (gate_checks(), tools/loopgate/verdicts.h): a check
// added without its "how, proves, does not prove, planted defects" section fails here.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 asks for a check that does not exist, so the test fails.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tools/loopgate/verdicts.h"

namespace loopgate {
namespace {

TEST(DocsCoverChecks, ChecksMdHasASectionPerCheck) {
  // <repo>/suites/unit/this file -> <repo>/docs/checks.md
  const auto doc = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "docs" / "checks.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in.good()) << doc;
  std::stringstream text;
  text << in.rdbuf();
  // The GPU-only checks' sections carry their titles, not their names.
  const std::map<std::string, std::string> title = {{"ledger_cupti", "ledger == CUPTI (GPU)"},
                                                    {"capture_probe", "CUDA-graph capture (GPU)"}};
  std::vector<std::string> checks;
  for (const auto& [check, suite] : gate_checks()) checks.push_back(check);
  if (std::getenv("LOOPGATE_WRONG_EXPECTATIONS")) checks.push_back("no_such_check");
  for (const std::string& check : checks) {
    const auto t = title.find(check);
    const std::string header = "\n## " + (t == title.end() ? check : t->second) + "\n";
    EXPECT_NE(text.str().find(header), std::string::npos) << doc << " has no section '" << header.substr(1, header.size() - 2)
                                                          << "' for the check " << check;
  }
}

}  // namespace
}  // namespace loopgate
