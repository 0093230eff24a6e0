// Fault injector: poisons one microbatch loss or one grad bucket with NaN or Inf at a chosen iteration and rank,
// so the gates can prove that every arm detects the fault as early as the baseline (same iteration, before
// optimizer.step). Poisoning is in place on the device (fill_ of element 0: no host read, no sync).
// Spec text: "iter=3,mb=0,rank=1,site=loss,kind=nan" or "iter=5,site=grad,bucket=2,kind=inf"; several specs
// joined by ';'. Not here: deciding what a detected fault does (trainer/loop/rerun.h).
#pragma once
#include <ATen/core/Tensor.h>

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

struct FaultFiring {
  int64_t iteration;
  int microbatch;  // -1 for a grad bucket
  int bucket;      // -1 for a loss
  int rank;
  FaultSpec::Site site;
  FaultSpec::Kind kind;
};

class FaultInjector {
 public:
  FaultInjector() = default;
  explicit FaultInjector(std::vector<FaultSpec> specs) : specs_(std::move(specs)) {}
  bool armed() const { return !specs_.empty(); }

  // report: the microbatch's loss (any shape); element 0 set to NaN/Inf when a spec matches. Returns fired.
  bool maybe_poison_loss(int64_t iteration, int microbatch, int rank, at::Tensor& report);
  // grads: the bucket's grad data (any shape); element 0 set to NaN/Inf when a spec matches. Returns fired.
  bool maybe_poison_bucket(int64_t iteration, int bucket, int rank, at::Tensor& grads);

  const std::vector<FaultFiring>& fired() const { return fired_; }
  bool fired_at(int64_t iteration) const;
  const std::vector<FaultSpec>& specs() const { return specs_; }

 private:
  std::vector<FaultSpec> specs_;
  std::vector<FaultFiring> fired_;
};

}  // namespace loopgate
