// The shared end of training_log (log_point.h): the device stats read from their table, the outputs and Megatron's
// line.
#include "trainer/loop/log_point.h"

#include <fmt/format.h>

namespace loopgate {

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

LogOutputs log_point_outputs(const SiteContext& c, const LogInputs& in, const LogValues& v, LoopTimers& timers,
                             bool print) {
  LogFields f;
  f.iteration = in.iteration;
  f.train_iters = in.train_iters;
  f.consumed_samples = in.consumed_samples;
  f.global_batch = in.global_batch;
  f.elapsed_ms_per_iteration = v.elapsed_ms_per_iteration;
  f.learning_rate = v.learning_rate;
  f.has_loss = v.lm_loss >= 0.0;  // Megatron drops a NaN or negative loss from the line
  f.lm_loss = v.lm_loss;
  f.loss_scale = v.loss_scale;
  f.has_grad_norm = std::isfinite(v.grad_norm) && v.grad_norm >= 0.0;
  f.grad_norm = v.grad_norm;
  f.has_num_zeros = c.config.optim.log_num_zeros_in_grad && std::isfinite(v.num_zeros) && v.num_zeros >= 0;
  f.num_zeros = v.num_zeros;
  f.has_params_norm = c.config.log_params_norm && std::isfinite(v.params_norm);
  f.params_norm = v.params_norm;
  f.skipped = v.skipped;
  f.nan = v.nan;

  LogOutputs out;
  if (print && c.last_rank()) out.line = format_log_line(f);
  out.values = v;
  out.timer_intervals = timers.take_log_point_intervals();
  out.timer_window = timers.shown_window();
  return out;
}

std::string format_log_line(const LogFields& f) {
  std::string s = fmt::format(" iteration {:8d}/{:8d} |", f.iteration, f.train_iters);
  s += fmt::format(" consumed samples: {:12d} |", f.consumed_samples);
  s += fmt::format(" elapsed time per iteration (ms): {:.1f} |", f.elapsed_ms_per_iteration);
  s += fmt::format(" learning rate: {:.6E} |", f.learning_rate);
  s += fmt::format(" global batch size: {:5d} |", f.global_batch);
  if (f.has_loss) s += fmt::format(" lm loss: {:.6E} |", f.lm_loss);
  s += fmt::format(" loss scale: {:.1f} |", f.loss_scale);
  if (f.has_grad_norm) s += fmt::format(" grad norm: {:.3f} |", f.grad_norm);
  if (f.has_num_zeros) s += fmt::format(" num zeros: {:.1f} |", f.num_zeros);
  if (f.has_params_norm) s += fmt::format(" params norm: {:.3f} |", f.params_norm);
  s += fmt::format(" number of skipped iterations: {:3d} |", f.skipped);
  s += fmt::format(" number of nan iterations: {:3d} |", f.nan);
  return s;
}

void record_log_point(IterationRecord& rec, const LogOutputs& log) {
  const LogValues& v = log.values;
  rec.lm_loss = v.lm_loss;
  rec.grad_norm = v.grad_norm;
  rec.num_zeros = v.num_zeros;
  rec.params_norm = v.params_norm;
  rec.learning_rate = v.learning_rate;
  rec.loss_scale = v.loss_scale;
  rec.nan = v.nan > 0;
  rec.timer_intervals = log.timer_intervals;
  rec.timer_window_first = log.timer_window.first;
  rec.timer_window_last = log.timer_window.last;
}

}  // namespace loopgate
