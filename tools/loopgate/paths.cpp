// Paths and programs checked before any work (paths.h): stat and access only, so a bad --json or --out is
// refused without leaving an empty file behind, and a good one is not truncated before the run that fills it.
// Not here: opening or writing the files (each subcommand does that once its work is done).
#include "tools/loopgate/paths.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/loopgate/process.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

namespace fs = std::filesystem;

std::string errno_text() { return std::strerror(errno); }

bool is_executable_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

}  // namespace

void check_output_dir(const std::string& flag, const std::string& dir) {
  fs::path p = fs::absolute(dir);
  while (!p.empty() && !fs::exists(p) && p != p.root_path()) p = p.parent_path();
  struct stat st;
  LG_INPUT_CHECK(stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "{} {}: {} is not a directory", flag, dir,
                 p.string());
  LG_INPUT_CHECK(access(p.c_str(), W_OK | X_OK) == 0, "{} {}: cannot create files in {} ({})", flag, dir, p.string(),
                 errno_text());
}

void check_output_file(const std::string& flag, const std::string& path) {
  LG_INPUT_CHECK(!path.empty(), "{} '': needs a file name", flag);
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    LG_INPUT_CHECK(!S_ISDIR(st.st_mode), "{} {}: is a directory (give a file name)", flag, path);
    LG_INPUT_CHECK(access(path.c_str(), W_OK) == 0, "{} {}: cannot write the file ({})", flag, path, errno_text());
    return;
  }
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  LG_INPUT_CHECK(stat(dir.c_str(), &st) == 0, "{} {}: directory {} does not exist ({})", flag, path, dir, errno_text());
  LG_INPUT_CHECK(S_ISDIR(st.st_mode), "{} {}: {} is not a directory", flag, path, dir);
  LG_INPUT_CHECK(access(dir.c_str(), W_OK | X_OK) == 0, "{} {}: cannot create files in {} ({})", flag, path, dir,
                 errno_text());
}

void check_input_file(const std::string& flag, const std::string& path) {
  LG_INPUT_CHECK(!path.empty(), "{} '': needs a file name", flag);
  struct stat st;
  LG_INPUT_CHECK(stat(path.c_str(), &st) == 0, "{} {}: cannot read the file ({})", flag, path, errno_text());
  LG_INPUT_CHECK(!S_ISDIR(st.st_mode), "{} {}: is a directory (give a file)", flag, path);
  LG_INPUT_CHECK(access(path.c_str(), R_OK) == 0, "{} {}: cannot read the file ({})", flag, path, errno_text());
}

void check_launcher(const std::string& flag, const std::string& command) {
  std::istringstream words(command);
  std::string program;
  words >> program;
  LG_INPUT_CHECK(!program.empty(), "{} '': needs a program", flag);
  if (program.find('/') != std::string::npos) {
    LG_INPUT_CHECK(is_executable_file(program), "{} {}: not an executable file", flag, "'" + command + "'");
    return;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && is_executable_file(dir + "/" + program)) return;
  throw InputError(fmt::format("{} {}: '{}' is not on PATH", flag, "'" + command + "'", program));
}

std::string command_output(const std::string& command, int* status) {
  // Through the one launcher (process.h): its output into a file of its own, read back.
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/loopgate-output-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    *status = -1;
    return "";
  }
  close(fd);
  ProcessSpec spec;
  spec.shell = command;
  spec.log_path = path;
  *status = Process(spec).wait();
  std::ifstream f(path);
  std::stringstream out;
  out << f.rdbuf();
  std::remove(path.c_str());
  return out.str();
}

}  // namespace loopgate
