// The shim's values files (run_values.h).
#include "tools/analysis/run_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "trainer/common/error.h"
#include "trainer/loop/trace.h"

namespace loopgate {
namespace fs = std::filesystem;
namespace {

// Python's float.hex() ("0x1.8p+1", "inf", "-inf", "nan"); null stays unset.
std::optional<double> exact_of(const nlohmann::json& v, const std::string& what, const std::string& name) {
  if (v.is_null()) return std::nullopt;
  LG_INPUT_CHECK(v.is_string(), "{}: {} is not a hex float string", name, what);
  const std::string s = v.get<std::string>();
  const std::string digits = s.rfind('-', 0) == 0 ? s.substr(1) : s;  // a decimal would claim bits it may not have
  LG_INPUT_CHECK(digits.rfind("0x", 0) == 0 || digits == "inf" || digits == "nan", "{}: {} '{}' is not a hex float",
                 name, what, s);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  LG_INPUT_CHECK(end && *end == '\0' && !s.empty(), "{}: {} '{}' is not a hex float", name, what, s);
  return d;
}

std::optional<LoggedValue> logged(std::optional<double> v) {
  if (!v) return std::nullopt;
  return LoggedValue{*v, hex(*v), true};
}

}  // namespace

RunValues run_values_from_json(const nlohmann::json& j, const std::string& name) {
  LG_INPUT_CHECK(j.is_object() && j.value("format", "") == "loopgate-values/1",
                 "{}: not a loopgate values file (format loopgate-values/1)", name);
  RunValues out;
  out.path = name;
  out.rank = j.value("rank", 0);
  out.exact.path = name;
  out.exact.kind = RunKind::kShimValues;
  std::map<int64_t, double> group_lr;  // step -> the first param group's LR after it
  for (const nlohmann::json& g : j.value("param_group_lrs", nlohmann::json::array())) {
    const auto lrs = g.value("lrs", nlohmann::json::array());
    if (!lrs.empty())
      if (auto v = exact_of(lrs.front(), "a param group's lr", name)) group_lr[g.value("step", int64_t{0})] = *v;
  }
  LG_INPUT_CHECK(j.contains("logs") && j["logs"].is_array(), "{}: no \"logs\" array", name);
  std::map<int64_t, RunEntry> entries;  // one per iteration: the last call for it
  for (const nlohmann::json& l : j["logs"]) {
    LG_INPUT_CHECK(l.contains("iteration") && l["iteration"].is_number_integer(), "{}: a log call without an integer "
                                                                                  "iteration", name);
    RunEntry e;
    e.iteration = l["iteration"].get<int64_t>();
    bool finite = true;
    const nlohmann::json loss = l.value("loss", nlohmann::json::object());
    for (const auto& [key, v] : loss.items()) {
      const std::optional<double> d = exact_of(v, "loss '" + key + "'", name);
      if (!d) continue;
      finite = finite && std::isfinite(*d);
      if (key == "lm loss") e.lm_loss = logged(d);
      else e.other[key] = hex(*d);
    }
    e.learning_rate = logged(exact_of(l.value("learning_rate", nlohmann::json()), "learning_rate", name));
    e.loss_scale = logged(exact_of(l.value("loss_scale", nlohmann::json()), "loss_scale", name));
    e.grad_norm = logged(exact_of(l.value("grad_norm", nlohmann::json()), "grad_norm", name));
    e.num_zeros = logged(exact_of(l.value("num_zeros", nlohmann::json()), "num_zeros", name));
    e.params_norm = logged(exact_of(l.value("params_norm", nlohmann::json()), "params_norm", name));
    const int64_t skipped = l.value("skipped", int64_t{0});
    e.skipped_iterations = skipped;
    e.nan_iterations = skipped > 0 && !finite ? 1 : 0;  // Megatron counts a skipped step with a non-finite loss
    if (auto it = group_lr.find(l.value("step", int64_t{-1})); it != group_lr.end())
      e.optimizer_lr = logged(it->second);
    out.calls.push_back({e.iteration, l.value("clock", 0.0), l.value("first", false)});
    entries[e.iteration] = std::move(e);
  }
  for (auto& [it, e] : entries) out.exact.entries.push_back(std::move(e));
  for (const nlohmann::json& d : j.value("digests", nlohmann::json::array())) {
    StepDigest sd;
    sd.step = d["step"].is_string() ? d["step"].get<std::string>() : std::to_string(d["step"].get<int64_t>());
    for (const nlohmann::json& t : d.value("tensors", nlohmann::json::array())) {
      LG_INPUT_CHECK(t.is_array() && t.size() == 2 && t[0].is_string() && t[1].is_string(),
                     "{}: a digest entry is not [name, digest]", name);
      sd.tensors.emplace_back(t[0].get<std::string>(), t[1].get<std::string>());
    }
    out.digests.push_back(std::move(sd));
  }
  return out;
}

RunLog read_any_run(const std::string& path) {
  std::ifstream in(path);
  const int first = in >> std::ws ? in.peek() : EOF;
  if (first == '{') {
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("format", "") == "loopgate-values/1") return run_values_from_json(j, path).exact;
  }
  return read_run(path);
}

std::vector<RunValues> read_values_folder(const std::string& dir) {
  std::vector<RunValues> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  static const std::regex name(R"(values\.(\d+)\.json)");
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!std::regex_match(e.path().filename().string(), name)) continue;
    std::ifstream in(e.path());
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    LG_INPUT_CHECK(!j.is_discarded(), "{}: does not parse as JSON", e.path().string());
    out.push_back(run_values_from_json(j, e.path().string()));
  }
  std::sort(out.begin(), out.end(), [](const RunValues& a, const RunValues& b) { return a.rank < b.rank; });
  return out;
}

std::optional<DigestParting> first_parting(const std::vector<StepDigest>& a, const std::vector<StepDigest>& b) {
  for (const StepDigest& da : a) {
    const auto db = std::find_if(b.begin(), b.end(), [&](const StepDigest& d) { return d.step == da.step; });
    if (db == b.end()) continue;
    std::optional<DigestParting> p;
    const size_t n = std::max(da.tensors.size(), db->tensors.size());
    for (size_t i = 0; i < n; ++i) {
      const bool same = i < da.tensors.size() && i < db->tensors.size() && da.tensors[i] == db->tensors[i];
      if (same) continue;
      if (!p) p = DigestParting{da.step, i < da.tensors.size() ? da.tensors[i].first : db->tensors[i].first, 0};
      ++p->differing;
    }
    if (p) return p;
  }
  return std::nullopt;
}

}  // namespace loopgate
