// Fault inject specs: the text form of a fault (`--inject`, the gates' scenario tables) and its parser.
// Spec text: "iter=3,mb=0,rank=1,site=loss,kind=nan" or "iter=5,site=grad,bucket=2,kind=inf"; several specs
// joined by ';'. Plain C++ (no LibTorch), so the parser is fuzzed on its own (suites/fuzz/fuzz_fault_spec.cpp).
// Not here: the injector that acts on a spec (fault.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loopgate {

struct FaultSpec {
  enum class Site { kLoss, kGradBucket };
  enum class Kind { kNaN, kInf };
  int64_t iteration = -1;  // required, >= 0
  int microbatch = -1;     // site=loss only; -1 = every microbatch
  int rank = -1;           // world rank; -1 = every rank
  Site site = Site::kLoss;  // required
  int bucket = -1;         // site=grad only; -1 = every bucket
  Kind kind = Kind::kNaN;  // default nan
};

// Malformed text -> InputError with one line naming the bad field (e.g. "fault spec 'iter=x': field 'iter':
// 'x' is not an integer"). Keys: iter (required), site (required: loss|grad), mb, rank, bucket, kind (nan|inf).
FaultSpec parse_fault_spec(const std::string& text);
std::vector<FaultSpec> parse_fault_specs(const std::string& text);  // ';'-separated; "" -> none
std::string to_string(const FaultSpec& spec);  // parses back to the same spec

}  // namespace loopgate
