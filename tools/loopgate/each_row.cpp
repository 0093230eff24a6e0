// `loopgate --each-row FILE` (each_row.h).
#include "tools/loopgate/each_row.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

#include "tools/loopgate/process.h"

namespace loopgate {

int each_row(const std::string& file, const std::function<int(int, char**)>& cli) {
  std::ifstream in(file);
  const nlohmann::json rows = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  const bool ok = !rows.is_discarded() && rows.is_array() && std::all_of(rows.begin(), rows.end(), [](const auto& r) {
    return r.is_array() && std::all_of(r.begin(), r.end(), [](const auto& a) { return a.is_string(); });
  });
  if (!ok) {
    std::fprintf(stderr, "loopgate: error: %s '%s': not a readable JSON array of argument arrays\n", kEachRowFlag,
                 file.c_str());
    return 2;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<std::string> args = {"loopgate"};
    for (const auto& a : rows[i]) args.push_back(a.get<std::string>());
    ProcessSpec spec;
    spec.log_path = fmt::format("{}.{}.out", file, i);
    spec.err_path = fmt::format("{}.{}.err", file, i);
    spec.body = [&] {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      return cli(static_cast<int>(args.size()), argv.data());
    };
    bool timed_out = false;
    const int code = run_process(spec, /*timeout_s=*/60, &timed_out);
    std::printf("row %zu exit %d\n", i, timed_out ? 124 : code);
  }
  return 0;
}

}  // namespace loopgate
