// Paths and programs a subcommand will use, checked before any work: files it writes (writable, not a
// directory; nothing created or truncated), files it reads, folders it fills, launchers it runs. Each throws
// InputError naming the flag and the path. Part of the report library too (`loopgate report` checks --out).
#pragma once
#include <string>

namespace loopgate {

// A file the command will write: an existing file must be writable and not a directory; a new one needs an
// existing, writable directory. Checked without creating or truncating anything.
void check_output_file(const std::string& flag, const std::string& path);
// A file the command will read: exists, is not a directory, readable.
void check_input_file(const std::string& flag, const std::string& path);
// A directory the command will create files in (made with its parents when missing): its nearest existing
// ancestor must be a writable directory.
void check_output_dir(const std::string& flag, const std::string& dir);
// A program the command will launch (its first word): a path to an executable file, or found on PATH.
void check_launcher(const std::string& flag, const std::string& command);

// What a shell command (`/bin/sh -c`) prints, stdout and stderr, and its exit code in *status (128 + the signal that
// ended it; -1 when no file for its output could be made).
std::string command_output(const std::string& command, int* status);

}  // namespace loopgate
