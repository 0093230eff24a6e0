// Fault inject specs: parsing and printing (fault_spec.h). No LibTorch here: suites/fuzz/ builds this file alone.
#include "trainer/instrument/fault_spec.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>

#include "trainer/common/error.h"

namespace loopgate {

// ---- parsing ----

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

int64_t parse_int(const std::string& text, const std::string& key, const std::string& value, int64_t lo) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  // The whole value, not up to an embedded NUL ("3\0x" is not an integer).
  LG_INPUT_CHECK(!value.empty() && end == value.c_str() + value.size() && errno == 0,
                 "fault spec '{}': field '{}': '{}' is not an integer", text, key, value);
  LG_INPUT_CHECK(v >= lo && v <= std::numeric_limits<int>::max(), "fault spec '{}': field '{}': {} is out of range (>= {})",
                 text, key, v, lo);
  return v;
}

}  // namespace

FaultSpec parse_fault_spec(const std::string& text) {
  FaultSpec spec;
  std::set<std::string> seen;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    LG_INPUT_CHECK(!item.empty(), "fault spec '{}': empty field (stray ',')", text);
    const auto eq = item.find('=');
    LG_INPUT_CHECK(eq != std::string::npos, "fault spec '{}': field '{}' has no '=' (expected key=value)", text, item);
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    LG_INPUT_CHECK(seen.insert(key).second, "fault spec '{}': field '{}' given twice", text, key);
    if (key == "iter") {
      spec.iteration = parse_int(text, key, value, 0);
    } else if (key == "mb") {
      spec.microbatch = value == "any" ? -1 : static_cast<int>(parse_int(text, key, value, 0));
    } else if (key == "rank") {
      spec.rank = value == "all" ? -1 : static_cast<int>(parse_int(text, key, value, 0));
    } else if (key == "bucket") {
      spec.bucket = value == "any" ? -1 : static_cast<int>(parse_int(text, key, value, 0));
    } else if (key == "site") {
      LG_INPUT_CHECK(value == "loss" || value == "grad", "fault spec '{}': field 'site': '{}' is not loss|grad", text,
                     value);
      spec.site = value == "loss" ? FaultSpec::Site::kLoss : FaultSpec::Site::kGradBucket;
    } else if (key == "kind") {
      LG_INPUT_CHECK(value == "nan" || value == "inf", "fault spec '{}': field 'kind': '{}' is not nan|inf", text, value);
      spec.kind = value == "nan" ? FaultSpec::Kind::kNaN : FaultSpec::Kind::kInf;
    } else {
      LG_INPUT_CHECK(false, "fault spec '{}': field '{}' is unknown (known: iter, mb, rank, site, bucket, kind)", text,
                     key);
    }
  }
  LG_INPUT_CHECK(seen.count("iter"), "fault spec '{}': field 'iter' is missing", text);
  LG_INPUT_CHECK(seen.count("site"), "fault spec '{}': field 'site' is missing (loss|grad)", text);
  LG_INPUT_CHECK(spec.site == FaultSpec::Site::kGradBucket || !seen.count("bucket"),
                 "fault spec '{}': field 'bucket' applies only to site=grad", text);
  // Grad buckets are checked once per step (after the last microbatch), so a microbatch means nothing there.
  LG_INPUT_CHECK(spec.site == FaultSpec::Site::kLoss || !seen.count("mb"),
                 "fault spec '{}': field 'mb' applies only to site=loss", text);
  return spec;
}

std::vector<FaultSpec> parse_fault_specs(const std::string& text) {
  std::vector<FaultSpec> out;
  std::stringstream ss(text);
  std::string one;
  while (std::getline(ss, one, ';'))
    if (!trim(one).empty()) out.push_back(parse_fault_spec(trim(one)));
  return out;
}

std::string to_string(const FaultSpec& s) {
  std::string out = fmt::format("iter={}", s.iteration);
  if (s.site == FaultSpec::Site::kLoss) {
    out += ",site=loss";
    if (s.microbatch >= 0) out += fmt::format(",mb={}", s.microbatch);
  } else {
    out += ",site=grad";
    if (s.bucket >= 0) out += fmt::format(",bucket={}", s.bucket);
  }
  if (s.rank >= 0) out += fmt::format(",rank={}", s.rank);
  out += s.kind == FaultSpec::Kind::kNaN ? ",kind=nan" : ",kind=inf";
  return out;
}

}  // namespace loopgate
