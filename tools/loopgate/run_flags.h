// The flags of `loopgate run` as the user gave them (std::optional: unset = the fixture's default), their
// CLI11 definitions, the range check of each flag on its own, and the conversion into a RunConfig.
// Checks that need the world size or several flags together (layout, model shape, batch, LR relations,
// --inject against the run) are in validate.h; both run before any work.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "tools/loopgate/run_flag_values.h"

namespace CLI {
class App;
}

namespace loopgate {

struct RunOptions;

void add_run_flags(CLI::App* run, RunFlags& flags);

// Each flag on its own: counts >= 1 (or >= 0 where 0 means something), reals finite and in range, names
// known, no contradictory pair (--sequence-parallel with --no-sequence-parallel, ...). InputError naming the
// flag and its value.
void check_run_flags(const RunFlags& flags);

// check_run_flags, then the fixture's config with the given flags applied (InputError as above).
RunOptions to_run_options(const RunFlags& flags);

// "'text'" for messages: values with spaces or separators stay readable.
std::string quoted(const std::string& text);

}  // namespace loopgate
