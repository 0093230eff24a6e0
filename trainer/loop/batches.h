// Megatron's get_batch, as the loop owns it: this rank's microbatches of an iteration, made on the host and copied
// to the device through the run's upload path (async_copy.h: pinned, non-blocking, no host sync; a plain .to(cuda)
// from pageable memory is a copy plus a stream synchronize, 8 unledgered syncs per iteration, caught by CUPTI). The
// replayed step driver copies each iteration's batch into the graph's static one (step_driver.h).
#pragma once
#include <cstdint>
#include <memory>

#include "trainer/loop/config.h"
#include "trainer/measure/async_copy.h"
#include "trainer/model/data.h"
#include "trainer/parallel/layout.h"

namespace loopgate {

class Batches {
 public:
  Batches(const RunConfig& cfg, const Layout& layout, int rank) : cfg_(cfg), layout_(layout), rank_(rank) {}
  std::unique_ptr<Upload> upload;  // made in the loop's setup, after the step driver
  Batch get(int64_t iteration);    // 0-based

 private:
  const RunConfig& cfg_;
  const Layout& layout_;
  int rank_;
};

}  // namespace loopgate
