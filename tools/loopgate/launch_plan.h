// Which suites executables `loopgate gate` launches per fixture, with which GoogleTest filter and device: the gate
// suites for the gate checks, and on a GPU the GPU-only suites, one process per GPU-only check. A plan, not a run
// (gate.cpp launches it), so the unit tests check it on CPU for a GPU runner's options.
#pragma once
#include <string>
#include <vector>

#include "fixtures/fixtures.h"
#include "tools/loopgate/commands.h"

namespace loopgate {

struct LaunchUnit {
  Fixture fixture;
  std::string exe, filter;
  std::string tag;             // "" for the gate suites, ".<check>" for a GPU-only suite: the log's name suffix
  std::string device = "cpu";  // --lg_device for the launch ("cpu": the flag is left out)
  int shard = 0, shards = 1;   // one of `shards` processes sharing the unit's tests (split_unit)
  std::string gpus;            // CUDA_VISIBLE_DEVICES for the launch ("": inherited): a GPU shard's own GPUs
};

// The GoogleTest filter of the gate checks `wanted` (every test when empty): each check's candidate-arm, plain and
// planted-defect tests.
std::string gtest_filter(const std::vector<std::string>& wanted);

// Per fixture, in order: the gate suites (on o.device) when a check of theirs is asked for (o.checks empty: every
// check), then with o.device == "cuda" the GPU-only suites asked for, one launch each (a refused capture, the
// baseline's probe, comes last in a process of its own). o.filter, when set, narrows the tests of every launch.
std::vector<LaunchUnit> launch_units(const GateOptions& o, const std::vector<Fixture>& fixtures);

// The full test names ("Suite.Name", "Arms/Suite.Name/arm") of a `--gtest_list_tests` output, in its order.
std::vector<std::string> parse_test_list(const std::string& gtest_list_output);

// The unit as `shards` processes (fewer when there are fewer groups), each with a filter naming its tests (`tests`:
// the unit's filter as the suites executable lists it). Tests go by group, every test of a group to one shard:
// a candidate-arm test's group is its arm, any other test's its suite. Groups take the shards in turn, in the
// order they first appear. A scenario two shards need runs in both: by arm, only the baseline's runs repeat.
std::vector<LaunchUnit> split_unit(const LaunchUnit& u, const std::vector<std::string>& tests, int shards);

// GPU shards: shard k takes block k % B of the B blocks of `ranks` GPUs in `visible` (the runner's GPU ids in
// order), so the shards of a fixture run side by side, one rank per GPU. More shards than blocks (an explicit
// --shards) share a block's GPUs; on one H200 that lost, time-sliced or under MPS (gate.cpp shard_count).
// False (units unchanged) when `visible` holds fewer than `ranks` GPUs.
bool assign_gpus(std::vector<LaunchUnit>* shards, const std::vector<std::string>& visible, int ranks);

}  // namespace loopgate
