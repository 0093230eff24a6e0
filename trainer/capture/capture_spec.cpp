// The capture probe's spec: region names and the "REGION[@ITERATION]" parser (capture.h). No MPI, no CUDA:
// suites/fuzz/ builds this file alone.
#include "trainer/capture/capture.h"

#include <charconv>
#include <string>
#include <vector>

#include "trainer/common/error.h"

namespace loopgate {

const std::vector<std::string>& capture_regions() {
  static const std::vector<std::string> r = {"forward_backward", "optimizer", "training_log"};
  return r;
}

CaptureSpec parse_capture_spec(const std::string& text) {
  CaptureSpec s;
  const size_t at = text.find('@');
  s.region = text.substr(0, at);
  bool known = false;
  for (const std::string& r : capture_regions()) known = known || r == s.region;
  LG_INPUT_CHECK(known, "capture probe '{}': region must be forward_backward, optimizer or training_log", text);
  if (at != std::string::npos) {
    const std::string it = text.substr(at + 1);
    LG_INPUT_CHECK(!it.empty() && it.find_first_not_of("0123456789") == std::string::npos,
                   "capture probe '{}': iteration after '@' must be a number", text);
    // std::stoll threw std::out_of_range past 2^63 (found by suites/fuzz/fuzz_capture_spec).
    const auto [end, ec] = std::from_chars(it.data(), it.data() + it.size(), s.iteration);
    LG_INPUT_CHECK(ec == std::errc() && end == it.data() + it.size(), "capture probe '{}': iteration {} is out of range",
                   text, it);
  }
  LG_INPUT_CHECK(s.iteration >= 2, "capture probe '{}': iteration must be >= 2 (iteration 1 warms up)", text);
  return s;
}

}  // namespace loopgate
