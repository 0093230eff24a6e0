#include "trainer/loop/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard
#include <fcntl.h>
#include <fmt/format.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "trainer/capture/capture.h"
#include "trainer/common/error.h"
#include "trainer/loop/mutation.h"
#include "trainer/measure/ledger.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/grad_scaler.h"
#include "trainer/optim/scheduler.h"

namespace loopgate {
namespace {

std::string rank_file(const std::string& dir, int64_t iteration, int rank) {
  return fmt::format("{}/rank_{:05d}.pt", checkpoint_iteration_dir(dir, iteration), rank);
}
std::string tracker_file(const std::string& dir) { return dir + "/latest_checkpointed_iteration.txt"; }

// The bytes of `path` on the disk before anything names them (fsync), then the folder's entry (the rename).
void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// `tmp` written and synced, then renamed onto `path`: a reader sees the whole file or none.
void publish(const std::string& tmp, const std::string& path) {
  sync_path(tmp);
  LG_INPUT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "checkpoint: cannot rename {} to {}", tmp, path);
  sync_path(std::filesystem::path(path).parent_path().string());
}

c10::IValue scalar(int64_t v) { return c10::IValue(v); }

}  // namespace

bool saves_at(const RunConfig& c, int64_t done) {
  return !c.save_dir.empty() && c.save_interval > 0 && done % c.save_interval == 0;
}
bool exits_at(const RunConfig& c, int64_t done) { return c.exit_interval > 0 && done % c.exit_interval == 0; }

bool checkpoint_and_decide_exit(const RunConfig& c, int64_t done, const std::function<void()>& save) {
  const bool saved = saves_at(c, done);
  if (saved) save();
  if (!exits_at(c, done)) return false;
  if (!c.save_dir.empty() && !saved) save();
  return true;
}

void check_save_intervals(const RunConfig& c) {
  if (c.save_dir.empty()) return;
  for (const auto& [flag, n] : {std::pair<const char*, int64_t>{"--save-interval", c.save_interval},
                                {"--exit-interval", c.exit_interval}})
    LG_INPUT_CHECK(n == 0 || n >= 2, "{} {}: a save falls after iteration 1", flag, n);
}

GraphState checkpoint_state(const Params& params, const Adam& adam, const GradScaler* scaler) {
  GraphState s;
  for (size_t i = 0; i < params.size(); ++i) s.emplace_back(fmt::format("param{}", i), params[i].value);
  for (auto& e : adam.state()) s.push_back(std::move(e));
  if (scaler) s.emplace_back("scaler.scale", scaler->scale());
  if (const auto* d = dynamic_cast<const DynamicGradScaler*>(scaler)) {
    s.emplace_back("scaler.growth_tracker", d->growth_tracker());
    s.emplace_back("scaler.hysteresis_tracker", d->hysteresis_tracker());
  }
  return s;
}

void restore_checkpoint_state(const std::string& dir, const Checkpoint& c, const GraphState& live) {
  std::map<std::string, at::Tensor> saved(c.tensors.begin(), c.tensors.end());
  at::NoGradGuard no_grad;  // the parameters are autograd leaves: written as the optimizer writes them
  for (const auto& [name, t] : live) {
    const auto it = saved.find(name);
    LG_INPUT_CHECK(it != saved.end() && it->second.sizes() == t.sizes() && it->second.scalar_type() == t.scalar_type(),
                   "--load {}: its iteration {} holds no {} of this run's shape and dtype (another model or layout)",
                   dir, c.iteration, name);
    at::Tensor target = t;
    target.copy_(it->second);
  }
}

std::vector<std::pair<std::string, int64_t>> checkpoint_args(const RunConfig& c, int world) {
  return {{"num-layers", c.model.layers},
          {"hidden-size", c.model.hidden},
          {"ffn-hidden-size", c.model.ffn_size()},
          {"num-attention-heads", c.model.heads},
          {"seq-length", c.model.seq},
          {"vocab-size", c.model.vocab},
          {"tensor-model-parallel-size", c.layout.tp},
          {"pipeline-model-parallel-size", c.layout.pp},
          {"world-size", world}};
}

void check_checkpoint_args(const std::string& dir, const Checkpoint& c, const RunConfig& run, int world) {
  const auto saved = [&c](const std::string& name) -> std::optional<int64_t> {
    for (const auto& [n, v] : c.args)
      if (n == name) return v;
    return std::nullopt;
  };
  for (const auto& [name, mine] : checkpoint_args(run, world)) {
    const std::optional<int64_t> theirs = saved(name);
    LG_INPUT_CHECK(theirs && *theirs == mine, "--load {}: iteration {} was saved with --{} {}, this run has {}", dir,
                   c.iteration, name, theirs ? std::to_string(*theirs) : "(none)", mine);
  }
}

std::string checkpoint_iteration_dir(const std::string& dir, int64_t iteration) {
  return fmt::format("{}/iter_{:07d}", dir, iteration);
}

void save_checkpoint(const std::string& dir, int rank, int world, const Checkpoint& c) {
  const std::string folder = checkpoint_iteration_dir(dir, c.iteration);
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  LG_INPUT_CHECK(!ec, "--save {}: cannot create {}: {}", dir, folder, ec.message());
  std::vector<at::Tensor> values;
  std::string names;
  torch::serialize::OutputArchive archive;
  for (const auto& [name, t] : c.tensors) {
    archive.write("t." + name, t);
    values.push_back(t);
    names += name + "\n";
  }
  archive.write("loopgate.names", c10::IValue(names));
  std::string args;
  for (const auto& [name, v] : c.args) args += fmt::format("{}={}\n", name, v);
  archive.write("loopgate.args", c10::IValue(args));
  archive.write("loopgate.format", scalar(kCheckpointFormat));
  archive.write("loopgate.rank", scalar(rank));
  archive.write("loopgate.world", scalar(world));
  archive.write("loopgate.iteration", scalar(c.iteration));
  archive.write("loopgate.consumed_samples", scalar(c.consumed_samples));
  archive.write("loopgate.scheduler_steps", scalar(c.scheduler_steps));
  for (const auto& [key, v] : window_numbers(c.window)) archive.write(key, scalar(v));
  archive.write("loopgate.checksum", scalar(static_cast<int64_t>(tensor_checksum(values) + window_hash(c.window))));
  const std::string path = rank_file(dir, c.iteration, rank);
  bool ok = true;
  try {
    archive.save_to(path + ".tmp");
    publish(path + ".tmp", path);
  } catch (const std::exception&) {
    ok = false;
  }
  // Every rank's file in place before the tracker names the iteration (Megatron writes it after a barrier too).
  const bool all = every_rank(ok);
  LG_INPUT_CHECK(ok, "--save {}: cannot write {}", dir, path);
  LG_INPUT_CHECK(all, "--save {}: another rank could not write its file of iteration {}", dir, c.iteration);
  if (rank != 0) return;
  const std::string tracker = tracker_file(dir);
  {
    std::ofstream out(tracker + ".tmp");
    out << c.iteration << "\n";
    LG_INPUT_CHECK(out.good(), "--save {}: cannot write {}", dir, tracker);
  }
  publish(tracker + ".tmp", tracker);
}

Checkpoint load_checkpoint(const std::string& dir, int rank, int world) {
  const std::string tracker = tracker_file(dir);
  std::ifstream in(tracker);
  int64_t iteration = -1;
  LG_INPUT_CHECK(in && (in >> iteration) && iteration >= 0, "--load {}: no checkpoint there ({} is missing or not an "
                 "iteration)", dir, tracker);
  const std::string path = rank_file(dir, iteration, rank);
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const std::exception&) {
    LG_INPUT_CHECK(false, "--load {}: cannot read {}", dir, path);
  }
  const auto number = [&](const char* key) {
    c10::IValue v;
    LG_INPUT_CHECK(archive.try_read(key, v) && v.isInt(), "--load {}: {} holds no {} (not a loopgate checkpoint)", dir,
                   path, key);
    return v.toInt();
  };
  LG_INPUT_CHECK(number("loopgate.format") == kCheckpointFormat, "--load {}: {} is of format {}, this loopgate reads {}",
                 dir, path, number("loopgate.format"), kCheckpointFormat);
  LG_INPUT_CHECK(number("loopgate.world") == world && number("loopgate.rank") == rank,
                 "--load {}: {} was saved by rank {} of {}, this is rank {} of {}", dir, path, number("loopgate.rank"),
                 number("loopgate.world"), rank, world);
  Checkpoint c;
  c.iteration = number("loopgate.iteration");
  c.consumed_samples = number("loopgate.consumed_samples");
  c.scheduler_steps = number("loopgate.scheduler_steps");
  std::map<std::string, int64_t> window;
  for (const auto& [key, v] : window_numbers({})) {
    c10::IValue value;
    if (archive.try_read(key, value) && value.isInt()) window[key] = value.toInt();
  }
  c.window = window_of(window);
  c10::IValue args;
  LG_INPUT_CHECK(archive.try_read("loopgate.args", args) && args.isString(), "--load {}: {} holds no loopgate.args "
                 "(not a loopgate checkpoint)", dir, path);
  std::istringstream arg_lines(args.toStringRef());
  for (std::string line; std::getline(arg_lines, line);) {
    const size_t eq = line.find('=');
    LG_INPUT_CHECK(eq != std::string::npos, "--load {}: {}: a damaged loopgate.args line '{}'", dir, path, line);
    c.args.emplace_back(line.substr(0, eq), std::atoll(line.c_str() + eq + 1));
  }
  c10::IValue names;
  archive.read("loopgate.names", names);
  std::istringstream lines(names.toStringRef());
  std::vector<at::Tensor> values;
  for (std::string name; std::getline(lines, name);) {
    at::Tensor t;
    archive.read("t." + name, t);
    c.tensors.emplace_back(name, t);
    values.push_back(t);
  }
  LG_INPUT_CHECK(static_cast<int64_t>(tensor_checksum(values) + window_hash(c.window)) == number("loopgate.checksum"),
                 "--load {}: {}: its tensors do not match its checksum (a damaged file)", dir, path);
  return c;
}

void save_train_state(const RunConfig& cfg, int rank, int world, const TrainState& s, const SavedWindow& window,
                      Ledger& ledger, const Mutation& m) {
  Checkpoint c;
  c.window = window;
  c.iteration = s.iteration;
  c.consumed_samples = s.consumed_samples;
  c.scheduler_steps = s.scheduler.num_steps();
  c.args = checkpoint_args(cfg, world);
  const GraphState live = checkpoint_state(s.params, s.adam, s.scaler);
  std::vector<at::Tensor> tensors;
  for (const auto& [name, t] : live) tensors.push_back(t);
  const std::vector<at::Tensor> host = ledger.host_copies(tensors);
  for (size_t i = 0; i < live.size(); ++i) c.tensors.emplace_back(live[i].first, host[i]);
  m.wrap(made::Saving{c});
  save_checkpoint(cfg.save_dir, rank, world, c);
}

SavedWindow load_train_state(const RunConfig& cfg, int rank, int world, const TrainState& s, const Mutation& m) {
  const std::string& dir = cfg.load_dir;
  Checkpoint c = load_checkpoint(dir, rank, world);
  check_checkpoint_args(dir, c, cfg, world);
  m.wrap(made::Loaded{c});
  restore_checkpoint_state(dir, c, checkpoint_state(s.params, s.adam, s.scaler));
  LG_INPUT_CHECK(c.iteration < cfg.train_iters, "--load {}: its iteration {} is not before --train-iters {}", dir,
                 c.iteration, cfg.train_iters);
  s.scheduler.step(c.scheduler_steps);
  s.consumed_samples = c.consumed_samples;
  s.iteration = c.iteration;
  return c.window;
}

}  // namespace loopgate
