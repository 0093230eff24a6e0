// The one way the CLI starts a child process (gate's launches, pair's runs, syncs' program, golden's capture job,
// the CLI's own rows, the shell commands whose output paths.h's command_output reads back): `/bin/sh -c COMMAND` (a command line as written, quoting and redirections included), an argv,
// or a function run by a forked copy of this process (no exec: what this process loaded stays loaded), with variables
// added to its environment, stdout and stderr into a log or inherited, and, where a timeout must end everything it
// started (mpirun, torchrun and their ranks), a process group of its own. A child left in the CLI's own group gets
// the terminal's Ctrl-C with it, as a user running it by hand expects.
#pragma once
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loopgate {

struct ProcessSpec {
  std::string shell;                                      // run by /bin/sh -c when argv and body are empty
  std::vector<std::string> argv;                          // else exec'ed through PATH
  std::function<int()> body;                              // given: run by the fork (no exec), which exits with its value
  std::vector<std::pair<std::string, std::string>> env;   // added to (or replacing in) the inherited environment
  std::string log_path;                                   // stdout and stderr, truncated; "" = inherited
  std::string err_path;                                   // stderr apart, truncated ("" = with stdout)
  bool own_group = false;                                 // a process group of its own (see above)
};

class Process {
 public:
  explicit Process(const ProcessSpec& spec);  // starts it (Error if it cannot)
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Its exit code once it has ended (128 + the signal if one ended it), without blocking.
  std::optional<int> poll();
  // Waits for its end. timeout_s > 0: past it, SIGTERM to its group (or itself), 3 s later SIGKILL, and *timed_out.
  int wait(double timeout_s = 0, bool* timed_out = nullptr);

 private:
  pid_t pid_ = -1;
  bool own_group_ = false;
  std::optional<int> code_;
};

// Starts spec and waits for it: the exit code.
int run_process(const ProcessSpec& spec, double timeout_s = 0, bool* timed_out = nullptr);

}  // namespace loopgate
