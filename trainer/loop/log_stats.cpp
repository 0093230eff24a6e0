// The log point's device stats (log_stats.h).
#include "trainer/loop/log_stats.h"

namespace loopgate {
namespace {
bool always(const RunConfig&) { return true; }
bool num_zeros_logged(const RunConfig& c) { return c.optim.log_num_zeros_in_grad; }
bool params_norm_logged(const RunConfig& c) { return c.log_params_norm; }
}  // namespace

const std::vector<LogStat>& log_stats() {
  static const std::vector<LogStat> rows = {
      {"grad_norm", &LogInputs::grad_norm, &LogValues::grad_norm, Site::kGradNorm, true, false, always},
      {"num_zeros", &LogInputs::num_zeros, &LogValues::num_zeros, Site::kNumZeros, true, true, num_zeros_logged},
      {"params_norm", &LogInputs::params_norm, &LogValues::params_norm, Site::kParamsNorm, false, false,
       params_norm_logged},
      {"loss_scale", &LogInputs::loss_scale, &LogValues::loss_scale, Site::kLossScale, false, false, always},
  };
  return rows;
}

}  // namespace loopgate
