// Fault injector: in-place poisoning (the spec parser is fault_spec.cpp).
#include "trainer/instrument/fault.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard (not via ATen.h in LibTorch 2.x)

#include <limits>

#include "trainer/common/error.h"

namespace loopgate {

// ---- poisoning ----

namespace {

void poison_first_element(at::Tensor& t, FaultSpec::Kind kind) {
  LG_CHECK(t.defined() && t.numel() > 0, "fault injector: cannot poison an empty tensor");
  const double v = kind == FaultSpec::Kind::kNaN ? std::numeric_limits<double>::quiet_NaN()
                                                 : std::numeric_limits<double>::infinity();
  at::NoGradGuard no_grad;
  at::Tensor e = t;
  while (e.dim() > 0) e = e.select(0, 0);  // a view of element 0, whatever the strides
  e.fill_(v);                              // the value rides in the kernel arguments: no copy, no sync
}

bool matches(int want, int got) { return want < 0 || want == got; }

}  // namespace

bool FaultInjector::maybe_poison_loss(int64_t iteration, int microbatch, int rank, at::Tensor& report) {
  for (const FaultSpec& s : specs_) {
    if (s.site != FaultSpec::Site::kLoss || s.iteration != iteration || !matches(s.microbatch, microbatch) ||
        !matches(s.rank, rank))
      continue;
    poison_first_element(report, s.kind);
    fired_.push_back({iteration, microbatch, -1, rank, s.site, s.kind});
    return true;
  }
  return false;
}

bool FaultInjector::maybe_poison_bucket(int64_t iteration, int bucket, int rank, at::Tensor& grads) {
  for (const FaultSpec& s : specs_) {
    if (s.site != FaultSpec::Site::kGradBucket || s.iteration != iteration || !matches(s.bucket, bucket) ||
        !matches(s.rank, rank))
      continue;
    poison_first_element(grads, s.kind);
    fired_.push_back({iteration, -1, bucket, rank, s.site, s.kind});
    return true;
  }
  return false;
}

bool FaultInjector::planned_at(int64_t iteration) const {
  for (const FaultSpec& s : specs_)
    if (s.iteration == iteration) return true;
  return false;
}

bool FaultInjector::fired_at(int64_t iteration) const {
  for (const auto& f : fired_)
    if (f.iteration == iteration) return true;
  return false;
}

}  // namespace loopgate
