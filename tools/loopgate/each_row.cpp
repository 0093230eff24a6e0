// `loopgate --each-row FILE` (each_row.h).
#include "tools/loopgate/each_row.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "tools/loopgate/process.h"

namespace loopgate {

namespace {

// A row: an array of arguments, or {"args": [...], "env": {"NAME": "value", ...}} (variables set in its copy).
bool strings(const nlohmann::json& a) {
  return a.is_array() && std::all_of(a.begin(), a.end(), [](const auto& x) { return x.is_string(); });
}
bool is_row(const nlohmann::json& r) {
  if (strings(r)) return true;
  return r.is_object() && r.contains("args") && strings(r["args"]) &&
         (!r.contains("env") || (r["env"].is_object() && std::all_of(r["env"].begin(), r["env"].end(),
                                                                      [](const auto& v) { return v.is_string(); })));
}

}  // namespace

int each_row(const std::string& file, const std::function<int(int, char**)>& cli) {
  std::ifstream in(file);
  const nlohmann::json rows = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (rows.is_discarded() || !rows.is_array() || !std::all_of(rows.begin(), rows.end(), is_row)) {
    std::fprintf(stderr, "loopgate: error: %s '%s': not a readable JSON array of rows (argument arrays)\n",
                 kEachRowFlag, file.c_str());
    return 2;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    std::vector<std::string> args = {"loopgate"};
    for (const auto& a : row.is_array() ? row : row["args"]) args.push_back(a.get<std::string>());
    ProcessSpec spec;
    if (row.is_object() && row.contains("env"))
      for (const auto& [k, v] : row["env"].items()) spec.env.emplace_back(k, v.get<std::string>());
    spec.own_group = true;  // a row stopped at its timeout takes what it started with it
    spec.log_path = fmt::format("{}.{}.out", file, i);
    spec.err_path = fmt::format("{}.{}.err", file, i);
    spec.body = [&] {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      return cli(static_cast<int>(args.size()), argv.data());
    };
    bool timed_out = false;
    const auto start = std::chrono::steady_clock::now();
    const int code = run_process(spec, /*timeout_s=*/60, &timed_out);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    std::printf("row %zu exit %d %lld ms\n", i, timed_out ? 124 : code, static_cast<long long>(ms.count()));
  }
  return 0;
}

}  // namespace loopgate
