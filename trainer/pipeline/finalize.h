// finalize_model_grads (Megatron core/distributed/finalize_model_grads.py, 8.4): run once after the step's
// last backward, in Megatron's order — (1) finish the DP bucket reductions, (2) all-reduce over TP the grads
// of replicated params that saw only s/tp tokens under sequence parallel, (3) all-reduce the tied word
// embedding grads over the embedding group {first, last pipeline stage}.
#pragma once
#include "trainer/model/gpt.h"
#include "trainer/optim/grad_buffer.h"

namespace loopgate {

struct FinalizeOptions {
  // Test switch: false drops step (2), so a test can show that missing reduction is caught.
  bool reduce_sp_grads = true;
};

// `grads` must have been built from stage.params (same order).
void finalize_model_grads(GptStage& stage, GradBuffer& grads, const FinalizeOptions& options = {});

}  // namespace loopgate
