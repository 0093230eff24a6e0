// The run_features gate's matrix is made from the flags' definitions: the features it crosses with the loop's
// decisions (fixtures/run_features.h) are exactly the `loopgate run` flags of the CLI's "Run features" group, so
// a feature flag added to the CLI without its row, or a row left after its flag, fails here.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 adds a flag the CLI does not have, so the test fails.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <set>
#include <string>

#include "fixtures/run_features.h"
#include "suites/unit/wrong.h"
#include "tools/loopgate/commands.h"
#include "tools/loopgate/run_flags.h"

namespace loopgate {
namespace {

TEST(RunFeaturesFlags, TheMatrixHasEveryFlagOfTheRunFeaturesGroupAndNoOther) {
  CLI::App app;
  RunFlags flags;
  CLI::App* run = add_run_command(app, flags);
  std::set<std::string> in_group, in_matrix;
  for (const CLI::Option* o : run->get_options())
    if (o->get_group() == kRunFeatures) in_group.insert(o->get_name());
  for (const RunFeature& f : run_features()) in_matrix.insert(f.flag);
  if (wrong()) in_matrix.insert("--no-such-feature");
  EXPECT_EQ(in_matrix, in_group);
  EXPECT_GE(in_group.size(), 5u) << "the group lost its flags";
  EXPECT_FALSE(loop_decisions().empty());
}

}  // namespace
}  // namespace loopgate
