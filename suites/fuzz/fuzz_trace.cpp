// Fuzz target: the Trace JSON reader (trace_from_string / trace_from_json, trainer/loop/trace.h).
// Any input parses or throws loopgate::Error; a parsed Trace written back (trace_to_string) reads back equal,
// bit for bit (traces_equal compares doubles by their bits: NaN payloads, -0.0, denormals).
#include "suites/fuzz/fuzz_common.h"
#include "trainer/loop/trace.h"

using namespace loopgate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Trace t;
  if (!fuzz::accepts([&] { t = trace_from_string(fuzz::text_of(data, size)); })) return 0;
  // What the writer makes of an accepted Trace must be accepted again: no try here, any throw is a bug.
  const Trace back = trace_from_string(trace_to_string(t));
  std::string why;
  fuzz::fuzz_require(traces_equal(t, back, &why), "trace -> json -> trace differs: " + why);
  return 0;
}
