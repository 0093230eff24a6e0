// The device statistics a log point reports beside the loss and the LR (grad norm, num zeros, params norm, loss
// scale): one table, read by every protocol family. The baseline reads each at its own site every iteration; a
// deferred family packs them into its batched read and lands them from it. A new logged device value is a member of
// LogInputs and of LogValues, a row here (with the site the baseline reads it at), and its field in the record.
// Megatron origin: training.py train_step / training_log (the values reduce_max_stat and the optimizer return).
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "trainer/loop/bundle.h"
#include "trainer/loop/config.h"
#include "trainer/loop/log_point.h"
#include "trainer/loop/sites.h"

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

// Which rows a family adds at one place in its bundle: a bundle casts each run of one dtype once, so a family may
// keep the counts apart from the floats.
enum class StatKinds { kAll, kFloating, kIntegral };

// The logged rows' values into `bundle`, in table order. A logged value this rank does not hold rides a reduced read
// as absent (every rank's bundle lines up in the MAX) and is left out of an unreduced one.
void add_log_stats(Bundle& bundle, const LogInputs& in, const RunConfig& config, bool reduced,
                   StatKinds kinds = StatKinds::kAll);

// Each row's value from a batched read's values (NaN where it did not ride), as the baseline's read would give it.
void land_log_stats(const std::map<std::string, double>& read, LogValues& out);

// The baseline's reads: each logged row it holds at its own site, in table order; NaN for the others.
void read_log_stats_eager(const SiteContext& c, const LogInputs& in, LogValues& out);

}  // namespace loopgate
