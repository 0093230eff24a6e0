#include "tools/loopgate/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <thread>

#include "trainer/common/error.h"

namespace loopgate {

Process::Process(const ProcessSpec& spec) : own_group_(spec.own_group) {
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);  // nothing buffered here is written twice
  pid_ = fork();
  LG_CHECK(pid_ >= 0, "cannot start a process (fork failed): {}",
           !spec.argv.empty() ? spec.argv[0] : spec.body ? std::string("a copy of this process") : spec.shell);
  if (pid_ == 0) {
    if (spec.own_group) setpgid(0, 0);
    for (const auto& [k, v] : spec.env) setenv(k.c_str(), v.c_str(), 1);
    const auto into = [](const std::string& path, std::initializer_list<int> fds) {
      const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) _exit(126);
      for (int to : fds) dup2(fd, to);
      close(fd);
    };
    if (!spec.log_path.empty()) into(spec.log_path, {1, 2});
    if (!spec.err_path.empty()) into(spec.err_path, {2});
    if (spec.body) {
      const int code = spec.body();
      std::fflush(nullptr);
      _exit(code);
    }
    if (spec.argv.empty()) {
      execl("/bin/sh", "sh", "-c", spec.shell.c_str(), static_cast<char*>(nullptr));
    } else {
      execvp(argv[0], argv.data());
      std::fprintf(stderr, "loopgate: cannot run '%s'\n", argv[0]);
    }
    _exit(127);
  }
  if (spec.own_group) setpgid(pid_, pid_);  // also here: a signal sent before the child ran setpgid still lands
}

namespace {
int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }
}  // namespace

std::optional<int> Process::poll() {
  if (code_) return code_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) code_ = exit_code(status);
  return code_;
}

int Process::wait(double timeout_s, bool* timed_out) {
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  bool ended_by_us = false;
  while (!poll()) {
    if (timeout_s > 0 && !ended_by_us && elapsed() > timeout_s) {
      ended_by_us = true;
      const pid_t target = own_group_ ? -pid_ : pid_;
      kill(target, SIGTERM);
      for (int i = 0; i < 150 && !poll(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (own_group_ || !code_) kill(target, SIGKILL);  // the group's other processes may outlive its leader
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (timed_out) *timed_out = ended_by_us;
  return *code_;
}

int run_process(const ProcessSpec& spec, double timeout_s, bool* timed_out) {
  Process p(spec);
  return p.wait(timeout_s, timed_out);
}

}  // namespace loopgate
