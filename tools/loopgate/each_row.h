// `loopgate --each-row FILE`: the CLI once per argument row of FILE, each row in a forked copy of this process, so a
// check of many rows (suites/cli/bad_input_generated.py) pays the process start-up once: loading LibTorch takes about
// 0.5 s a process on a 2-core machine, the checks of one row a few milliseconds. A row sees what a fresh process
// would (the fork is taken before the CLI does anything), and its exit code, stdout and stderr are its own.
#pragma once
#include <functional>
#include <string>

namespace loopgate {

// The flag, checked as main's first argument before anything else runs.
inline constexpr const char* kEachRowFlag = "--each-row";

// FILE: a JSON array of rows, each an array of arguments (without the program's name) or {"args": [...], "env":
// {"NAME": "value"}}. Row i's stdout goes to FILE.i.out and its stderr to FILE.i.err; "row I exit CODE MS ms" goes to
// this process's stdout, in order (124: the row ran past 60 s and was stopped). `cli` is the CLI's main. Exit 0 when
// every row ran, 2 on a bad FILE.
int each_row(const std::string& file, const std::function<int(int, char**)>& cli);

}  // namespace loopgate
