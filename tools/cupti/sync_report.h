// The injection library's files at its process's exit (sync_inject.cpp): the table as text, the process's JSON table
// (trainer/measure/sync_table_file.h) and one CSV row per (iteration, site). In each file name "%p" stands for the
// pid, so each process of a job writes its own file.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/cupti/sync_sites.h"
#include "trainer/measure/sync_table.h"

namespace loopgate::cupti {

// What the JSON says of the process besides its table.
struct ProcessFacts {
  std::string region;       // SyncRegion::describe
  int64_t iterations_seen = 0;
  std::string python;       // "read", or why Python frames could not be read
  nlohmann::json overhead_ab;  // null unless the overhead A/B ran
};

std::string per_process(std::string path);
// The sites with a counted call, their kinds and first Python stacks (from `sites`), per iteration.
nlohmann::json process_json(const SyncTable& table, const ProcessFacts& facts, SyncSites& sites);
// Each writes nothing for an empty path; the text goes to stderr where its file cannot be opened.
void write_text(const std::string& path, const std::string& text);
void write_json(const std::string& path, const nlohmann::json& j);
void write_csv(const std::string& path, const SyncTable& table);

}  // namespace loopgate::cupti
