// Checkpoint files (trainer/loop/checkpoint.h): a save loads back as saved, and each bad one is refused with an
// InputError naming it: no tracker, a truncated file, tensors that do not match the file's checksum, a newer format,
// another world size (another layout), another model shape (check_checkpoint_args). The bad files are made here by
// writing a saved file's archive again with one thing changed (the format's keys are the test's to know).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 expects the opposite of each answer, so every test fails.
#include <gtest/gtest.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "fixtures/golden_files.h"
#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/loop/checkpoint.h"

namespace loopgate {
namespace {

namespace fs = std::filesystem;

// A fresh folder for one test's checkpoint, removed after it.
struct CheckpointFolder {
  std::string path = (fs::temp_directory_path() / ("loopgate_ckpt_" + std::to_string(::getpid()) + "_" +
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                         .string();
  CheckpointFolder() { remove_tree(path); }
  ~CheckpointFolder() { remove_tree(path); }
  std::string rank0() const { return checkpoint_iteration_dir(path, 6) + "/rank_00000.pt"; }
};

Checkpoint checkpoint_sample() {
  Checkpoint c;
  c.iteration = 6;
  c.consumed_samples = 48;
  c.scheduler_steps = 40;
  c.tensors = {{"param0", at::arange(6, at::kFloat).reshape({2, 3})}, {"adam.step", at::full({}, 5, at::kLong)}};
  c.args = checkpoint_args(RunConfig{}, 1);
  return c;
}

// The InputError's text, or "" when `load` did not refuse.
std::string checkpoint_refusal(const std::function<void()>& load) {
  try {
    load();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Writes `file`'s archive again: its numbers through `numbers`, its tensors through `tensors`.
void rewrite_checkpoint(const std::string& file, const std::function<void(std::map<std::string, int64_t>&)>& numbers,
                        const std::function<void(std::map<std::string, at::Tensor>&)>& tensors) {
  torch::serialize::InputArchive in;
  in.load_from(file);
  c10::IValue names_value, args_value;
  in.read("loopgate.names", names_value);
  in.read("loopgate.args", args_value);
  std::map<std::string, int64_t> n;
  for (const char* key : {"loopgate.format", "loopgate.rank", "loopgate.world", "loopgate.iteration",
                          "loopgate.consumed_samples", "loopgate.scheduler_steps", "loopgate.checksum",
                          "loopgate.window.has_loss", "loopgate.window.loss_sum_bits", "loopgate.window.advanced",
                          "loopgate.window.skipped", "loopgate.window.nan", "loopgate.window.abort_at",
                          "loopgate.window.abort_code"}) {
    c10::IValue v;
    if (in.try_read(key, v)) n[key] = v.toInt();
  }
  std::map<std::string, at::Tensor> t;
  std::istringstream lines(names_value.toStringRef());
  for (std::string name; std::getline(lines, name);) in.read("t." + name, t[name]);
  numbers(n);
  tensors(t);
  torch::serialize::OutputArchive out;
  for (const auto& [name, value] : t) out.write("t." + name, value);
  out.write("loopgate.names", names_value);
  out.write("loopgate.args", args_value);
  for (const auto& [key, value] : n) out.write(key, c10::IValue(value));
  out.save_to(file);
}

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Checkpoint, LoadsBackAsSaved) {
  CheckpointFolder dir;
  save_checkpoint(dir.path, 0, 1, checkpoint_sample());
  const Checkpoint c = load_checkpoint(dir.path, 0, 1);
  EXPECT_EQ(c.iteration, 6 + wrong());
  EXPECT_EQ(c.consumed_samples, 48);
  EXPECT_EQ(c.scheduler_steps, 40);
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].first, "param0");
  EXPECT_TRUE(c.tensors[0].second.equal(checkpoint_sample().tensors[0].second));
  EXPECT_EQ(c.tensors[1].second.item<int64_t>(), 5);
  EXPECT_EQ(c.args, checkpoint_sample().args);
  EXPECT_FALSE(fs::exists(dir.rank0() + ".tmp"));  // renamed into place
}

// A save between log points: the log window so far, as any family continues it.
Checkpoint checkpoint_with_window() {
  Checkpoint c = checkpoint_sample();
  c.window.has_loss = true;
  c.window.loss_sum = 21.828125f;  // 3 losses' fp32 sum
  c.window.counts.advanced = 3;
  c.window.counts.skipped = 1;
  c.window.counts.nan = 1;
  c.window.abort_at = 5;
  c.window.abort_code = 17;
  return c;
}

TEST(Checkpoint, TheLogWindowLoadsBackAsSaved) {
  CheckpointFolder dir;
  save_checkpoint(dir.path, 0, 1, checkpoint_with_window());
  const SavedWindow w = load_checkpoint(dir.path, 0, 1).window;
  EXPECT_TRUE(w.has_loss);
  EXPECT_EQ(w.loss_sum, 21.828125f);
  EXPECT_EQ(w.counts.advanced, 3 + wrong());
  EXPECT_EQ(w.counts.skipped, 1);
  EXPECT_EQ(w.counts.nan, 1);
  EXPECT_EQ(w.abort_at, 5);
  EXPECT_EQ(w.abort_code, 17);
  EXPECT_EQ(load_checkpoint(dir.path, 0, 1).tensors.size(), 2u);  // the window is not among the state's tensors
}

TEST(Checkpoint, AWindowThatDoesNotMatchTheChecksumRefused) {
  CheckpointFolder dir;
  save_checkpoint(dir.path, 0, 1, checkpoint_with_window());
  rewrite_checkpoint(dir.rank0(), [](auto& n) { n["loopgate.window.skipped"] = 0; }, [](auto&) {});
  const std::string e = checkpoint_refusal([&] { load_checkpoint(dir.path, 0, 1); });
  EXPECT_EQ(mentions(e, dir.rank0() + ": its tensors do not match its checksum"), !wrong()) << e;
}

TEST(Checkpoint, NoTrackerRefused) {
  CheckpointFolder dir;
  fs::create_directories(dir.path);
  const std::string e = checkpoint_refusal([&] { load_checkpoint(dir.path, 0, 1); });
  EXPECT_EQ(mentions(e, "latest_checkpointed_iteration.txt is missing"), !wrong()) << e;
}

TEST(Checkpoint, TruncatedFileRefusedNamingIt) {
  CheckpointFolder dir;
  save_checkpoint(dir.path, 0, 1, checkpoint_sample());
  fs::resize_file(dir.rank0(), fs::file_size(dir.rank0()) / 2);
  const std::string e = checkpoint_refusal([&] { load_checkpoint(dir.path, 0, 1); });
  EXPECT_EQ(mentions(e, "cannot read " + dir.rank0()), !wrong()) << e;
}

TEST(Checkpoint, TensorsThatDoNotMatchTheChecksumRefused) {
  CheckpointFolder dir;
  save_checkpoint(dir.path, 0, 1, checkpoint_sample());
  rewrite_checkpoint(dir.rank0(), [](auto&) {}, [](auto& t) { t["param0"] = t["param0"] + 1; });
  const std::string e = checkpoint_refusal([&] { load_checkpoint(dir.path, 0, 1); });
  EXPECT_EQ(mentions(e, dir.rank0() + ": its tensors do not match its checksum"), !wrong()) << e;
}

TEST(Checkpoint, NewerFormatRefused) {
  CheckpointFolder dir;
  save_checkpoint(dir.path, 0, 1, checkpoint_sample());
  rewrite_checkpoint(dir.rank0(), [](auto& n) { n["loopgate.format"] = kCheckpointFormat + 1; }, [](auto&) {});
  const std::string e = checkpoint_refusal([&] { load_checkpoint(dir.path, 0, 1); });
  EXPECT_EQ(mentions(e, fmt::format("{} is of format {}, this loopgate reads {}", dir.rank0(), kCheckpointFormat + 1,
                                    kCheckpointFormat)),
            !wrong())
      << e;
}

TEST(Checkpoint, AnotherWorldSizeRefused) {
  CheckpointFolder dir;
  save_checkpoint(dir.path, 0, 1, checkpoint_sample());
  const std::string e = checkpoint_refusal([&] { load_checkpoint(dir.path, 0, 2); });
  EXPECT_EQ(mentions(e, dir.rank0() + " was saved by rank 0 of 1, this is rank 0 of 2"), !wrong()) << e;
}

TEST(Checkpoint, AnotherModelShapeRefusedNamingTheFlag) {
  CheckpointFolder dir;
  save_checkpoint(dir.path, 0, 1, checkpoint_sample());
  RunConfig wider;
  wider.model.hidden = 2 * RunConfig{}.model.hidden;
  const std::string e = checkpoint_refusal([&] { check_checkpoint_args(dir.path, load_checkpoint(dir.path, 0, 1), wider, 1); });
  EXPECT_EQ(mentions(e, fmt::format("iteration 6 was saved with --hidden-size {}, this run has {}", RunConfig{}.model.hidden,
                                    wider.model.hidden)),
            !wrong())
      << e;
  EXPECT_EQ(checkpoint_refusal([&] { check_checkpoint_args(dir.path, load_checkpoint(dir.path, 0, 1), RunConfig{}, 1); }),
            wrong() ? "x" : "");
}

}  // namespace
}  // namespace loopgate
