// remove_tree (fixtures/golden_files.h): the one way loopgate removes its temporary folders (golden --update and
// --check, the planted-read scan). On a GPU runner std::filesystem::remove_all crashed there after the files were
// written (results/history/results-gpu-log.md §13, §14); this guards the replacement on CPU: a nested folder with files, a
// symlink (not followed) and an empty subfolder is gone, what the symlink points to is not.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 expects the folder to remain, so the test fails.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fixtures/golden_files.h"

namespace loopgate {
namespace {

namespace fs = std::filesystem;

TEST(RemoveTree, NestedFilesLinksAndEmptyFoldersGoTheLinkTargetStays) {
  const fs::path root = fs::temp_directory_path() / ("loopgate_remove_tree_" + std::to_string(::getpid()));
  const fs::path outside = root.string() + "_target";
  fs::create_directories(root / "a" / "b");
  fs::create_directories(root / "empty");
  fs::create_directories(outside);
  std::ofstream(root / "a" / "b" / "trace.json") << "{}";
  std::ofstream(root / "top.json") << "{}";
  std::ofstream(outside / "keep.json") << "{}";
  fs::create_directory_symlink(outside, root / "a" / "link");
  remove_tree(root.string());
  EXPECT_EQ(fs::exists(root), std::getenv("LOOPGATE_WRONG_EXPECTATIONS") != nullptr);
  EXPECT_TRUE(fs::exists(outside / "keep.json"));
  fs::remove(outside / "keep.json");
  fs::remove(outside);
}

}  // namespace
}  // namespace loopgate
