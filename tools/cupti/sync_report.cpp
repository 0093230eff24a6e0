// The injection library's files (sync_report.h).
#include "tools/cupti/sync_report.h"

#include <unistd.h>

#include <cstdio>
#include <map>

#include "trainer/measure/sync_table_file.h"

namespace loopgate::cupti {

std::string per_process(std::string path) {
  for (size_t at = path.find("%p"); at != std::string::npos; at = path.find("%p", at))
    path.replace(at, 2, std::to_string(getpid()));
  return path;
}

nlohmann::json process_json(const SyncTable& table, const ProcessFacts& facts, SyncSites& sites) {
  std::map<std::string, sync_file::SiteRow> rows;
  for (const auto& [iter, by_site] : table)
    for (const auto& [key, t] : by_site) {
      if (t.syncs() + t.pageable_async + t.stalls == 0) continue;
      sync_file::SiteRow& r = rows[key];
      if (!r.counter_columns) {
        const SyncSites::Info info = sites.info(key);
        r.site = info.site;
        r.kind = info.kind;
        r.stack = info.stack;
        r.counter_columns = true;
      }
      r.per_iteration[iter] = t.syncs() + t.pageable_async + t.stalls;
      r.syncs += t.syncs();
      r.pageable += t.pageable_async;
      r.stalls += t.stalls;
      r.blocked_ms += t.sync_ms;
    }
  sync_file::ProcessTable out;
  out.pid = static_cast<int>(getpid());
  out.region = facts.region;
  out.iterations_seen = facts.iterations_seen;
  for (const auto& [iter, by_site] : table) out.iterations.push_back(iter);
  out.python = facts.python;
  for (auto& [key, r] : rows) out.sites.push_back(std::move(r));
  out.overhead_ab = facts.overhead_ab;
  return sync_file::to_json(out);
}

void write_text(const std::string& path, const std::string& text) {
  FILE* f = path.empty() ? stderr : std::fopen(path.c_str(), "a");
  if (f == nullptr) f = stderr;
  std::fputs(text.c_str(), f);
  if (f != stderr) std::fclose(f);
}

void write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return;
  std::fputs(j.dump(1).c_str(), f);
  std::fputs("\n", f);
  std::fclose(f);
}

void write_csv(const std::string& path, const SyncTable& table) {
  if (path.empty()) return;
  FILE* c = std::fopen(path.c_str(), "w");
  if (!c) return;
  std::fprintf(c, "iteration,site,synchronizes,sync_memcpys,pageable_async,stalls,driver_calls,blocked_ms,"
                  "sync_ms,max_call_ms,slowest_call\n");
  for (const auto& [iter, sites] : table)
    for (const auto& [s, t] : sites)
      std::fprintf(c, "%lld,\"%s\",%lld,%lld,%lld,%lld,%lld,%.4f,%.4f,%.4f,%s\n", static_cast<long long>(iter),
                   s.c_str(), static_cast<long long>(t.synchronizes), static_cast<long long>(t.sync_memcpys),
                   static_cast<long long>(t.pageable_async), static_cast<long long>(t.stalls),
                   static_cast<long long>(t.driver_calls), t.blocked_ms, t.sync_ms, t.max_call_ms,
                   t.slowest_call.c_str());
  std::fclose(c);
}

}  // namespace loopgate::cupti
