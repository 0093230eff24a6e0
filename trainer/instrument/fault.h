// Fault injector: poisons one microbatch loss or one grad bucket with NaN or Inf at a chosen iteration and rank,
// so the gates can prove that every arm detects the fault as early as the baseline (same iteration, before
// optimizer.step). Poisoning is in place on the device (fill_ of element 0: no host read, no sync).
// The spec type and its text form are in fault_spec.h. Not here: deciding what a detected fault does
// (trainer/loop/rerun.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/instrument/fault_spec.h"

namespace loopgate {

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
  // Whether a spec names `iteration` on any rank (every rank answers alike: --cuda-graph runs it eagerly).
  bool planned_at(int64_t iteration) const;
  const std::vector<FaultSpec>& specs() const { return specs_; }

 private:
  std::vector<FaultSpec> specs_;
  std::vector<FaultFiring> fired_;
};

}  // namespace loopgate
