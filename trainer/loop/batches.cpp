// Megatron's get_batch (batches.h).
#include "trainer/loop/batches.h"

namespace loopgate {

Batch Batches::get(int64_t iteration) {
  Batch b = make_host_batch(cfg_.model, cfg_.data, layout_, rank_, iteration);
  for (Microbatch& m : b.microbatches) {
    m.tokens = upload->copy(m.tokens);
    m.labels = upload->copy(m.labels);
  }
  return b;
}

}  // namespace loopgate
