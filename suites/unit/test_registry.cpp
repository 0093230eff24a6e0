// Unit tests for arms and fixtures registered from outside the trainer (docs/custom-arms.md): register_arm and
// register_fixture add names that all_arms / find_arm / all_fixtures / fixture_config then know; the static
// registrars work before main; duplicates and bad names are InputErrors; --lg_describe's JSON lists them; the
// default golden dir follows $LOOPGATE_GOLDEN_DIR. Not here: the gates on a registered arm (examples/custom_arm).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "fixtures/defects/mutations.h"
#include "fixtures/fixtures.h"
#include "fixtures/golden.h"
#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/loop/arms.h"

namespace loopgate {
namespace {

Arm static_arm() {
  Arm a = find_arm("syncfree");  // registration may read the built-in arms, whatever the initialization order
  a.name = "unit-static-arm";
  auto m = std::make_shared<FnMutation>();  // a loop change travels with the arm
  m->lr = [](double lr) { return lr * 2; };
  a.mutation = m;
  return a;
}

RunConfig static_fixture_config() {
  RunConfig c = fixture_config("tp2sp");
  c.model.hidden = 32;
  c.layout = {2, 1, true};  // a comma inside the registrar's arguments: the macros are variadic
  return c;
}

}  // namespace
}  // namespace loopgate

// Registered before main, as a user's gate executable does.
LOOPGATE_REGISTER_ARM(loopgate::static_arm());
LOOPGATE_REGISTER_FIXTURE(loopgate::Fixture{"unit-static-fx", 2, "registered by a static initializer"},
                          loopgate::static_fixture_config);

namespace loopgate {
namespace {

// The message of the InputError `f` throws, or "" when it throws none.
template <typename F>
std::string input_error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(RegisterArm, StaticRegistrationJoinsAllArmsAfterTheBuiltInOnes) {
  const Arm& a = find_arm("unit-static-arm");
  EXPECT_EQ(a.mutated().step_lr(1.0), wrong() ? 1.0 : 2.0);
  EXPECT_EQ(a.nan_check, SyncMode::kDeferred);  // copied from syncfree
  size_t builtin = 0, at = 0;
  for (size_t i = 0; i < all_arms().size(); ++i) {
    if (all_arms()[i].name == "zerosync") builtin = i;  // the last built-in arm
    if (all_arms()[i].name == "unit-static-arm") at = i;
  }
  EXPECT_GT(at, builtin + wrong() * all_arms().size());
}

TEST(RegisterArm, RegisteredArmIsFoundByName) {
  Arm a;
  a.name = "unit-runtime-arm";
  a.exit_vote = SyncMode::kDeferred;
  const size_t before = all_arms().size();
  register_arm(a);
  EXPECT_EQ(all_arms().size(), before + 1 + wrong());
  EXPECT_EQ(all_arms().back().name, "unit-runtime-arm");
  EXPECT_EQ(find_arm("unit-runtime-arm").exit_vote, wrong() ? SyncMode::kEager : SyncMode::kDeferred);
  EXPECT_EQ(find_arm("unit-runtime-arm").stat_bundle, SyncMode::kEager);
}

TEST(RegisterArm, DuplicateAndBadNamesAreInputErrors) {
  Arm dup;
  dup.name = wrong() ? "unit-fresh-name" : "baseline";
  EXPECT_EQ(input_error_of([&] { register_arm(dup); }), "register_arm: an arm named 'baseline' is already registered");
  Arm again = static_arm();  // registered above
  EXPECT_EQ(input_error_of([&] { register_arm(again); }),
            wrong() ? "" : "register_arm: an arm named 'unit-static-arm' is already registered");
  Arm underscore;
  underscore.name = "my_arm";
  EXPECT_EQ(input_error_of([&] { register_arm(underscore); }),
            wrong() ? "" : "register_arm: arm name 'my_arm' may hold only letters, digits and '-'");
  Arm comma;
  comma.name = "a,b";
  EXPECT_EQ(input_error_of([&] { register_arm(comma); }),
            wrong() ? "" : "register_arm: arm name 'a,b' may hold only letters, digits and '-'");
  EXPECT_EQ(input_error_of([] { register_arm(Arm{}); }), wrong() ? "" : "register_arm: the arm has no name");
  EXPECT_EQ(input_error_of([] { find_arm("my_arm"); }).rfind("unknown arm 'my_arm' (known: baseline, ", 0),
            wrong() ? std::string::npos : 0u);
}

TEST(RegisterFixture, StaticRegistrationGivesItsConfigUnderItsName) {
  const Fixture& f = find_fixture("unit-static-fx");
  EXPECT_EQ(f.world, 2 + wrong());
  RunConfig c = fixture_config("unit-static-fx");
  EXPECT_EQ(c.fixture, "unit-static-fx");  // set by fixture_config, not by the user's function
  EXPECT_EQ(c.model.hidden, wrong() ? 64 : 32);
  EXPECT_EQ(c.layout.tp, 2);
  EXPECT_NO_THROW(check_world(c, 2));
  EXPECT_EQ(input_error_of([&] { check_world(c, 1); }),
            wrong() ? "" : "fixture unit-static-fx needs 2 ranks (mpirun -np 2), this job has 1");
}

TEST(RegisterFixture, RegisteredFixtureJoinsAllFixtures) {
  const size_t before = all_fixtures().size();
  register_fixture({"unit-runtime-fx", 1, "one rank, 2 layers"}, [] {
    RunConfig c = fixture_config("single");
    c.model.layers = 2;
    return c;
  });
  EXPECT_EQ(all_fixtures().size(), before + 1 + wrong());
  EXPECT_EQ(all_fixtures().back().name, "unit-runtime-fx");
  EXPECT_EQ(fixture_config("unit-runtime-fx").model.layers, 2 + wrong());
  EXPECT_EQ(fixture_config("single").model.layers, 4);  // the built-in fixture is untouched
}

TEST(RegisterFixture, DuplicateAndBadInputAreInputErrors) {
  auto single = [] { return fixture_config("single"); };
  EXPECT_EQ(input_error_of([&] { register_fixture({wrong() ? "unit-fresh-fx" : "tp2sp", 2, ""}, single); }),
            "register_fixture: a fixture named 'tp2sp' is already registered");
  EXPECT_EQ(input_error_of([&] { register_fixture({"unit-zero", wrong(), ""}, single); }),
            wrong() ? "" : "register_fixture: fixture 'unit-zero' needs a world size >= 1 (got 0)");
  EXPECT_EQ(input_error_of([&] { register_fixture({"unit/slash", 1, ""}, single); }),
            wrong() ? "" : "register_fixture: fixture name 'unit/slash' may hold only letters, digits, '-' and '_'");
  EXPECT_EQ(input_error_of([] { register_fixture({"unit-nofn", 1, ""}, nullptr); }),
            wrong() ? "" : "register_fixture: fixture 'unit-nofn' has no config function");
}

TEST(Registry, DescribeJsonListsRegisteredArmsAndFixtures) {
  const nlohmann::json j = nlohmann::json::parse(registry_json());
  bool arm = false, fixture = false;
  for (const auto& a : j.at("arms")) arm = arm || a.at("name") == "unit-static-arm";
  for (const auto& f : j.at("fixtures"))
    fixture = fixture || (f.at("name") == "unit-static-fx" && f.at("world") == 2 + wrong());
  EXPECT_TRUE(arm);
  EXPECT_TRUE(fixture);
  EXPECT_EQ(j.at("golden_dir"), wrong() ? "" : default_golden_dir());
}

TEST(Registry, GoldenDirFollowsTheEnvironmentElseTheSourceTree) {
  const char* old = std::getenv("LOOPGATE_GOLDEN_DIR");
  const std::string saved = old ? old : "";
  setenv("LOOPGATE_GOLDEN_DIR", "/somewhere/golden", 1);
  EXPECT_EQ(default_golden_dir(), wrong() ? "/elsewhere/golden" : "/somewhere/golden");
  unsetenv("LOOPGATE_GOLDEN_DIR");
  // The build tree's executables: golden/ beside the sources, holding the sync budgets.
  EXPECT_EQ(std::filesystem::exists(default_golden_dir() + "/sync_budgets.json"), !wrong());
  if (old) setenv("LOOPGATE_GOLDEN_DIR", saved.c_str(), 1);
}

}  // namespace
}  // namespace loopgate
