// How step time is read from run files (`loopgate ab`, `compare`): a plain struct, so the subcommands' options
// (commands.h) hold it without depending on ab.h's functions.
#pragma once
#include <cstdint>
#include <string>

namespace loopgate {

struct StepTimeOptions {
  int64_t window = 0;          // iterations per window (window ends at iterations divisible by it); 0: per log line
  int64_t warmup_windows = 1;  // windows dropped at the start of every run
  std::string source = "auto";  // auto | timestamps | elapsed
};
void check_step_time_options(const StepTimeOptions& o);  // InputError naming the flag (defined in ab.cpp)

}  // namespace loopgate
