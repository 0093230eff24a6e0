// The log window (log_window.h): its start from a save and its numbers in the checkpoint.
#include "trainer/loop/log_window.h"

#include <cstring>

#include "trainer/common/error.h"

namespace loopgate {

std::vector<std::pair<std::string, int64_t>> window_numbers(const SavedWindow& w) {
  uint32_t bits = 0;
  std::memcpy(&bits, &w.loss_sum, sizeof bits);
  return {{"loopgate.window.has_loss", w.has_loss}, {"loopgate.window.loss_sum_bits", bits},
          {"loopgate.window.advanced", w.counts.advanced}, {"loopgate.window.skipped", w.counts.skipped},
          {"loopgate.window.nan", w.counts.nan},    {"loopgate.window.abort_at", w.abort_at},
          {"loopgate.window.abort_code", w.abort_code}};
}

SavedWindow window_of(const std::map<std::string, int64_t>& n) {
  SavedWindow w;
  const auto at = [&n](const char* key) { return n.count(key) ? n.at(key) : 0; };
  w.has_loss = at("loopgate.window.has_loss") != 0;
  const auto bits = static_cast<uint32_t>(at("loopgate.window.loss_sum_bits"));
  std::memcpy(&w.loss_sum, &bits, sizeof bits);
  w.counts = {at("loopgate.window.advanced"), at("loopgate.window.skipped"), at("loopgate.window.nan")};
  w.abort_at = at("loopgate.window.abort_at");
  w.abort_code = static_cast<int>(at("loopgate.window.abort_code"));
  return w;
}

uint64_t window_hash(const SavedWindow& w) {
  uint64_t h = 0;
  for (const auto& [key, v] : window_numbers(w)) h = h * 1099511628211ULL + static_cast<uint64_t>(v);
  return h;
}

void LogWindow::begin(const SavedWindow& saved, bool carries_abort) {
  LG_INPUT_CHECK(carries_abort || saved.abort_at == 0, "--load: the checkpoint's log window holds an abort due from "
                 "iteration {}, which only an arm that reads nothing between log points carries to its next log point",
                 saved.abort_at);
  counts = saved.counts;
  has_loss = saved.has_loss;
  host_loss_sum = saved.loss_sum;
  due_abort.reset();
  if (saved.abort_at > 0) due_abort = LateAbort{saved.abort_at, saved.abort_code};
}

SavedWindow LogWindow::saved(bool loss, float loss_sum) const {
  SavedWindow w;
  w.has_loss = loss;
  w.loss_sum = loss_sum;
  w.counts = counts;
  if (due_abort) {
    w.abort_at = due_abort->fault_iteration;
    w.abort_code = due_abort->exit_code;
  }
  return w;
}

}  // namespace loopgate
