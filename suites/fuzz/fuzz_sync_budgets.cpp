// Fuzz target: the sync-budget readers (find_sync_budget, budget_allowed, budget_sites; fixtures/golden_files.h)
// on sync_budgets.json text. For every (fixture, scenario, arm) the input names, and one it may not, each reader
// returns or throws loopgate::Error; a budget it returns allows a count >= 0 at every category and site.
#include <tuple>

#include "fixtures/golden_files.h"
#include "suites/fuzz/fuzz_common.h"

using namespace loopgate;
using nlohmann::json;

namespace {

// Keys of j[key] where j and j[key] are objects (the walk itself must not trip on a malformed file).
std::vector<std::string> keys_under(const json& j, const char* key) {
  std::vector<std::string> out;
  if (j.is_object() && j.contains(key) && j[key].is_object())
    for (const auto& [k, v] : j[key].items()) out.push_back(k);
  return out;
}

const json& at_or_null(const json& j, const std::string& k) {
  static const json null;
  return j.is_object() && j.contains(k) ? j[k] : null;
}

std::vector<std::tuple<std::string, std::string, std::string>> names_in(const json& j) {
  std::vector<std::tuple<std::string, std::string, std::string>> out = {{"tp2sp", "log_interval_1", "baseline"}};
  const json& fixtures = at_or_null(j, "fixtures");
  for (const std::string& f : keys_under(j, "fixtures")) {
    const json& fx = at_or_null(fixtures, f);
    for (const std::string& s : keys_under(fx, "scenarios"))
      for (const std::string& a : keys_under(at_or_null(at_or_null(fx, "scenarios"), s), "arms")) out.push_back({f, s, a});
  }
  return out;
}

void check_budget(const json& b, const std::string& where) {
  std::vector<std::string> sites;
  if (!fuzz::accepts([&] { sites = budget_sites(b); })) return;
  sites.push_back("timers");
  for (const char* cat : {"first_iteration", "log", "nonlog"})
    for (const std::string& site : sites) {
      int64_t n = 0;
      if (fuzz::accepts([&] { n = budget_allowed(b, cat, site); }))
        fuzz::fuzz_require(n >= 0, where + " " + cat + " " + site + ": a budget of " + std::to_string(n) + " reads");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json j;
  if (!fuzz::accepts([&] { j = parse_json_text(fuzz::text_of(data, size), "fuzz input"); })) return 0;
  for (const auto& [fixture, scenario, arm] : names_in(j)) {
    const json* b = nullptr;
    if (fuzz::accepts([&, &f = fixture, &s = scenario, &a = arm] { b = find_sync_budget(j, f, s, a); }) && b)
      check_budget(*b, fixture + "/" + scenario + "/" + arm);
  }
  return 0;
}
