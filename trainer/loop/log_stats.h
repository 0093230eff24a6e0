// The device statistics a log point reports beside the loss and the LR (grad norm, num zeros, params norm, loss
// scale): one table, which every protocol family reads through log_point.h (the baseline each at its own site every
// iteration, a deferred family in its batched read) and which names the sites a deferred stat bundle moves (arms.cpp).
// A new logged device value is a member of LogInputs and of LogValues, a row here (with the ledger's site the
// baseline reads it at), and its field in the record.
// Megatron origin: training.py train_step / training_log (the values reduce_max_stat and the optimizer return).
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "trainer/loop/config.h"
#include "trainer/measure/ledger.h"

namespace loopgate {

struct LogStat {
  const char* key;                  // its name in a batched read
  at::Tensor LogInputs::*input;     // the device value the step made
  double LogValues::*value;         // where the log point's value goes
  Site site;                        // where the baseline reads it
  bool reduce_max;                  // the baseline reads it through reduce_max_stat (else one item())
  bool integral;                    // a count (int64)
  bool (*logged)(const RunConfig&); // whether the run logs it (Megatron's --log-* flags)
};

// The rows, in the order every family reads them.
const std::vector<LogStat>& log_stats();

// Which rows a family adds at one place in its batched read (log_point.h add_log_stats).
enum class StatKinds { kAll, kFloating, kIntegral };

}  // namespace loopgate
