// The one-line form of a digest (digest_record.h).
#include "trainer/measure/digest_record.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <sstream>

#include "trainer/common/error.h"
#include "trainer/common/strings.h"

namespace loopgate {
namespace {
constexpr std::array<const char*, 6> kPhaseNames = {"forward", "backward", "grad_reduction", "clip", "optimizer", "log"};

}  // namespace

const char* digest_phase_name(DigestPhase phase) { return kPhaseNames.at(static_cast<size_t>(phase)); }

DigestPhase parse_digest_phase(const std::string& name) {
  for (size_t i = 0; i < kPhaseNames.size(); ++i)
    if (name == kPhaseNames[i]) return static_cast<DigestPhase>(i);
  throw InputError(fmt::format("digest phase '{}' is not forward|backward|grad_reduction|clip|optimizer|log", name));
}

bool digest_compared(const std::string& name) {
  return name.find('@') == std::string::npos || ends_with(name, "@numerics");
}

std::string to_string(const DigestRecord& r) {
  return fmt::format("{} {} {} {} 0x{:016x}", r.microbatch, digest_phase_name(r.phase), r.name, r.what, r.digest);
}

DigestRecord parse_digest_record(const std::string& line, int64_t iteration) {
  std::istringstream in(line);
  std::string phase, hex, rest;
  DigestRecord r;
  r.iteration = iteration;
  in >> r.microbatch >> phase >> r.name >> r.what >> hex;
  const bool read = !in.fail() && !(in >> rest);
  // 0x and 16 hex digits, parsed without exceptions (fuzzed input)
  const bool digits = hex.size() == 18 && hex.rfind("0x", 0) == 0 &&
                      std::from_chars(hex.data() + 2, hex.data() + 18, r.digest, 16).ptr == hex.data() + 18;
  LG_INPUT_CHECK(read && digits && (r.what == "input" || r.what == "output"),
                 "trace JSON: digest '{}' is not 'MB PHASE NAME input|output 0xDIGEST'", line);
  r.phase = parse_digest_phase(phase);
  return r;
}

}  // namespace loopgate
