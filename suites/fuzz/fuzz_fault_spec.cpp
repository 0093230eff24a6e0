// Fuzz target: fault inject specs (parse_fault_specs / parse_fault_spec, fixtures/faults/fault_spec.h).
// Any input parses or throws loopgate::Error; parse -> to_string -> parse gives the same specs.
#include <vector>

#include "suites/fuzz/fuzz_common.h"
#include "fixtures/faults/fault_spec.h"

using namespace loopgate;

namespace {

bool same(const FaultSpec& a, const FaultSpec& b) {
  return a.iteration == b.iteration && a.microbatch == b.microbatch && a.rank == b.rank && a.site == b.site &&
         a.bucket == b.bucket && a.kind == b.kind;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = fuzz::text_of(data, size);
  fuzz::accepts([&] { parse_fault_spec(text); });
  std::vector<FaultSpec> specs;
  if (!fuzz::accepts([&] { specs = parse_fault_specs(text); })) return 0;
  std::string joined;
  for (const FaultSpec& s : specs) joined += (joined.empty() ? "" : ";") + to_string(s);
  const std::vector<FaultSpec> back = parse_fault_specs(joined);  // no try: the printer's text must parse
  fuzz::fuzz_require(back.size() == specs.size(), "'" + joined + "' parses to another number of specs");
  for (size_t i = 0; i < specs.size(); ++i)
    fuzz::fuzz_require(same(specs[i], back[i]), "spec " + std::to_string(i) + " of '" + joined + "' differs");
  return 0;
}
