// Fuzz target: the capture-probe spec "REGION[@ITERATION]" (parse_capture_spec, trainer/capture/capture.h).
// Any input parses or throws loopgate::Error; an accepted spec names a known region and an iteration >= 2, and
// its canonical text (REGION@ITERATION) parses to the same spec.
#include <algorithm>

#include "suites/fuzz/fuzz_common.h"
#include "trainer/capture/capture.h"

using namespace loopgate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CaptureSpec s;
  if (!fuzz::accepts([&] { s = parse_capture_spec(fuzz::text_of(data, size)); })) return 0;
  const auto& regions = capture_regions();
  fuzz::fuzz_require(std::find(regions.begin(), regions.end(), s.region) != regions.end(),
                     "accepted an unknown region '" + s.region + "'");
  fuzz::fuzz_require(s.iteration >= 2, "accepted iteration " + std::to_string(s.iteration));
  const std::string canonical = s.region + "@" + std::to_string(s.iteration);
  const CaptureSpec back = parse_capture_spec(canonical);  // no try: the canonical text must parse
  fuzz::fuzz_require(back.region == s.region && back.iteration == s.iteration, "'" + canonical + "' parses differently");
  return 0;
}
