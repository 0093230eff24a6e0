// The sync counter's contract with the CLI, defined once: the environment that configures the injected counter and
// its Python shim, and the per-process table file it writes (format loopgate-syncs/1). Writers: the counter
// (tools/cupti/sync_inject.cpp) and `loopgate run`, which writes a CPU run's ledger in the same form
// (tools/loopgate/run.cpp). Reader: `loopgate syncs`, and `pair` through it (tools/loopgate/syncs.cpp). Header-only:
// the injection library compiles no trainer source but cupti_core.cpp.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loopgate::sync_file {

inline constexpr char kFormat[] = "loopgate-syncs/1";               // one process's table
inline constexpr char kMergedFormat[] = "loopgate-syncs-merged/1";  // `loopgate syncs --json`: {"processes": [...]}

// The environment. What each does: sync_inject.cpp's header and tools/cupti/loopgate_pyshim/sitecustomize.py.
inline constexpr char kEnvInjection[] = "CUDA_INJECTION64_PATH";  // the driver loads the counter from here
inline constexpr char kEnvShimLib[] = "LOOPGATE_SYNC_LIB";        // the shim's iteration markers
inline constexpr char kEnvShimIterFn[] = "LOOPGATE_SYNC_ITER_FN"; // the function each of whose calls is an iteration
inline constexpr char kEnvText[] = "LOOPGATE_CUPTI_OUT";
inline constexpr char kEnvJson[] = "LOOPGATE_CUPTI_JSON";
inline constexpr char kEnvCsv[] = "LOOPGATE_CUPTI_CSV";
inline constexpr char kEnvRoi[] = "LOOPGATE_CUPTI_ROI";
inline constexpr char kEnvIterPrefix[] = "LOOPGATE_CUPTI_ITER";
inline constexpr char kEnvSkipLibs[] = "LOOPGATE_CUPTI_SKIP";
inline constexpr char kEnvSkipPython[] = "LOOPGATE_PY_SKIP";
inline constexpr char kEnvSlowUs[] = "LOOPGATE_CUPTI_SLOW_US";
inline constexpr char kEnvLaunches[] = "LOOPGATE_CUPTI_LAUNCHES";
inline constexpr char kEnvAllCalls[] = "LOOPGATE_CUPTI_ALL_CALLS";
inline constexpr char kEnvOverheadAb[] = "LOOPGATE_CUPTI_AB";
inline constexpr char kEnvNvtx[] = "LOOPGATE_CUPTI_NVTX";

// One (site, kind) row of a process's table.
struct SiteRow {
  std::string site, kind;
  std::map<int64_t, int64_t> per_iteration;  // iteration -> syncs there (decimal-string keys in the file)
  // The counter's own columns; a ledger's table has none of them.
  bool counter_columns = false;
  std::vector<std::string> stack;  // the Python frames at the site's first call
  int64_t syncs = 0, pageable = 0, stalls = 0;
  double blocked_ms = 0.0;
};

struct ProcessTable {
  int64_t pid = 0;
  std::string region, python;
  int64_t iterations_seen = 0;
  std::vector<int64_t> iterations;
  std::vector<SiteRow> sites;
  std::optional<nlohmann::json> overhead_ab;  // the counter writes it always (null unless LOOPGATE_CUPTI_AB=1)
};

inline nlohmann::json to_json(const SiteRow& r) {
  nlohmann::json per = nlohmann::json::object();
  for (const auto& [iteration, n] : r.per_iteration) per[std::to_string(iteration)] = n;
  nlohmann::json j = {{"site", r.site}, {"kind", r.kind}, {"per_iteration", per}};
  if (r.counter_columns) {
    j["stack"] = r.stack;
    j["syncs"] = r.syncs;
    j["pageable"] = r.pageable;
    j["stalls"] = r.stalls;
    j["blocked_ms"] = r.blocked_ms;
  }
  return j;
}

inline nlohmann::json to_json(const ProcessTable& t) {
  nlohmann::json sites = nlohmann::json::array();
  for (const SiteRow& r : t.sites) sites.push_back(to_json(r));
  nlohmann::json j = {{"format", kFormat},          {"pid", t.pid},   {"region", t.region},
                      {"iterations_seen", t.iterations_seen}, {"iterations", t.iterations},
                      {"python", t.python},         {"sites", sites}};
  if (t.overhead_ab) j["overhead_ab"] = *t.overhead_ab;
  return j;
}

// What a reader cannot do without in one process's table, said as the end of a one-line error; "" when whole.
inline std::string table_problem(const nlohmann::json& p) {
  if (!p.is_object() || !p.contains("sites") || !p["sites"].is_array()) return "a process table without \"sites\"";
  for (const nlohmann::json& s : p["sites"])
    if (!s.is_object() || !s.value("site", nlohmann::json()).is_string() ||
        !s.value("kind", nlohmann::json()).is_string() || !s.contains("per_iteration") ||
        !s["per_iteration"].is_object())
      return "a site row without its \"site\", \"kind\" and \"per_iteration\" object";
  return "";
}

}  // namespace loopgate::sync_file
