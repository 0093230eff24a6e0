// One digest as the Trace holds it (digests.h makes them): its key, its value, and its one-line form. No LibTorch
// here, so the Trace's reader (and its fuzz target) needs none.
#pragma once
#include <cstdint>
#include <string>

namespace loopgate {

enum class DigestPhase { kForward, kBackward, kGradReduction, kClip, kOptimizer, kLog };
const char* digest_phase_name(DigestPhase phase);  // forward, backward, grad_reduction, clip, optimizer, log
DigestPhase parse_digest_phase(const std::string& name);  // InputError on an unknown name

struct DigestRecord {
  int64_t iteration = 0;  // 1-based, as the Trace's records
  int microbatch = -1;    // -1 outside a microbatch (after the backward)
  DigestPhase phase = DigestPhase::kForward;
  std::string name;       // "layers.1.self_attention.linear_proj", "tp#0.all_reduce.sum@numerics", a parameter's
  std::string what;       // input | output
  uint64_t digest = 0;
  bool operator==(const DigestRecord& o) const {
    return iteration == o.iteration && microbatch == o.microbatch && phase == o.phase && name == o.name &&
           what == o.what && digest == o.digest;
  }
};
// Whether two runs' records of this name are compared when looking for the first divergence (fixtures/localize.h):
// every module, grad, optimizer and loss record, and the collectives on the numerics path ("...@numerics"); not
// the collectives elsewhere, whose values are host times, verdict flags or reads an arm merged.
bool digest_compared(const std::string& name);
// "MB PHASE NAME WHAT 0xDIGEST" (the Trace's form); parse: InputError quoting a malformed line.
std::string to_string(const DigestRecord& r);
DigestRecord parse_digest_record(const std::string& line, int64_t iteration);

}  // namespace loopgate
