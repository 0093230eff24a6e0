// Fuzz target: the golden-values readers (fixtures/golden_files.h). Each input is tried in three roles, each of
// which must parse or throw loopgate::Error:
//   a golden values file (<F>/golden_values_cpu.json): compared with itself and with golden/single's, both ways,
//     under the matching environment (exact bits) and a differing one (Megatron's tolerances);
//   an environment file (<F>/environment_cpu.json): golden/single's values checked under it;
//   an LR sequences file (lr_sequences.json): every (case, global batch) it names read back;
//   a golden digests file (<F>/digests_cpu.json): read into a Trace, and that Trace restricted as golden keeps it.
// Properties: a golden values file compared with itself under a matching environment has no value failure;
// an environment file matches exactly when it equals the environment.
#include <charconv>
#include <map>

#include "fixtures/golden_files.h"
#include "suites/fuzz/fuzz_common.h"

using namespace loopgate;
using nlohmann::json;

namespace {

struct Real {
  json values, env;
  std::map<std::string, std::string> env_map;
};

// golden/single's files (LOOPGATE_GOLDEN_DIR: the source tree's golden/, set by CMakeLists.txt).
const Real& real() {
  static const Real r = [] {
    Real x;
    x.values = read_json_file(std::string(LOOPGATE_GOLDEN_DIR) + "/single/golden_values_cpu.json");
    x.env = read_json_file(std::string(LOOPGATE_GOLDEN_DIR) + "/single/environment_cpu.json");
    for (const auto& [k, v] : x.env.items()) x.env_map[k] = v.get<std::string>();
    return x;
  }();
  return r;
}

void as_golden_values(const json& j) {
  const Real& r = real();
  GoldenCheck self;
  if (fuzz::accepts([&] { self = check_golden_values(j, r.env, j, r.env_map); })) {
    for (const std::string& f : self.failures)
      fuzz::fuzz_require(f.find("metric missing") != std::string::npos || f.find("no golden steps") != std::string::npos,
                         "a golden values file fails against itself: " + f);
  }
  std::map<std::string, std::string> other = r.env_map;
  other["blas"] = "another BLAS";  // tolerances instead of exact bits
  fuzz::accepts([&] { check_golden_values(j, r.env, j, other); });
  fuzz::accepts([&] { check_golden_values(j, r.env, r.values, r.env_map); });
  fuzz::accepts([&] { check_golden_values(r.values, r.env, j, other, 3); });
}

void as_environment(const json& j) {
  const Real& r = real();
  GoldenCheck gc;
  if (!fuzz::accepts([&] { gc = check_golden_values(r.values, j, r.values, r.env_map); })) return;
  fuzz::fuzz_require(gc.environment_matches == (j == r.env),
                     "environment_matches is " + std::to_string(gc.environment_matches) + " for " + j.dump());
}

std::vector<int64_t> global_batches_named(const json& c) {
  std::vector<int64_t> out = {8, 16, 64};  // the fixtures' global batches
  if (!c.is_object() || !c.contains("by_global_batch") || !c["by_global_batch"].is_object()) return out;
  for (const auto& [key, v] : c["by_global_batch"].items()) {
    int64_t b = 0;
    if (std::from_chars(key.data(), key.data() + key.size(), b).ec == std::errc()) out.push_back(b);
  }
  return out;
}

void as_lr_sequences(const json& j) {
  if (!j.is_object() || !j.contains("cases") || !j["cases"].is_object()) {
    fuzz::accepts([&] { golden_lr_sequence(j, "cosine-warmup1", 16); });
    return;
  }
  for (const auto& [name, c] : j["cases"].items())
    for (int64_t b : global_batches_named(c)) fuzz::accepts([&, &name = name] { golden_lr_sequence(j, name, b); });
}

void as_golden_digests(const json& j) {
  Trace t;
  if (fuzz::accepts([&] { t = trace_from_golden_digests(j); })) golden_digest_records(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json j;
  if (!fuzz::accepts([&] { j = parse_json_text(fuzz::text_of(data, size), "fuzz input"); })) return 0;
  as_golden_values(j);
  as_environment(j);
  as_lr_sequences(j);
  as_golden_digests(j);
  return 0;
}
