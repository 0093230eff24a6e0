// The log point's device statistics (log_stats.h).
#include "trainer/loop/log_stats.h"

#include <cmath>

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

void add_log_stats(Bundle& bundle, const LogInputs& in, const RunConfig& config, bool reduced, StatKinds kinds) {
  for (const LogStat& s : log_stats()) {
    if (!s.logged(config)) continue;
    if (kinds != StatKinds::kAll && s.integral != (kinds == StatKinds::kIntegral)) continue;
    const at::Tensor& t = in.*s.input;
    if (t.defined()) {
      bundle.add(s.key, t);
    } else if (reduced) {
      bundle.add_absent(s.key);
    }
  }
}

void land_log_stats(const std::map<std::string, double>& read, LogValues& out) {
  for (const LogStat& s : log_stats()) {
    auto it = read.find(s.key);
    // A count went through reduce_max_stat's float32 tensor in the baseline (sites.cpp); a read carries it exact.
    out.*s.value = it == read.end() ? NAN : s.integral ? as_reduce_max_stat(it->second) : it->second;
  }
}

void read_log_stats_eager(const SiteContext& c, const LogInputs& in, LogValues& out) {
  for (const LogStat& s : log_stats()) {
    const at::Tensor& t = in.*s.input;
    out.*s.value = !s.logged(c.config) || !t.defined() ? NAN
                   : s.reduce_max                     ? reduce_max_stat_eager(c, s.site, t)
                                                      : c.read_scalar(s.site, t);
  }
}

}  // namespace loopgate
