// The capture probe's plain-C++ side: region names, the spec parser, the verdict line, the MPI vote, and the
// session factory (the CUDA session lives in capture_cuda.cpp, GPU builds only).
#include "trainer/instrument/capture.h"

#include <fmt/format.h>
#include <mpi.h>

#include "trainer/common/error.h"

namespace loopgate {

#if LOOPGATE_HAS_CUDA
std::unique_ptr<CaptureSession> make_cuda_capture_session();  // capture_cuda.cpp
std::unique_ptr<CaptureSession> make_capture_session() { return make_cuda_capture_session(); }
#else
std::unique_ptr<CaptureSession> make_capture_session() { return nullptr; }
#endif

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
    s.iteration = std::stoll(it);
  }
  LG_INPUT_CHECK(s.iteration >= 2, "capture probe '{}': iteration must be >= 2 (iteration 1 warms up)", text);
  return s;
}

std::string describe(const CaptureVerdict& v) {
  if (!v.attempted) return "capture probe: not reached";
  std::string where = fmt::format("capture probe: region {} of iteration {}", v.region, v.iteration);
  if (v.replayed)
    return fmt::format("{}: captured and replayed (global capture mode), {} ledger read(s) inside", where,
                       v.reads_in_region);
  if (v.captured) return where + ": captured here, not replayed (another rank's capture failed)";
  return fmt::format("{}: NOT capturable: first read inside at site {}: {}", where, v.site.empty() ? "(none)" : v.site,
                     v.error);
}

bool every_rank(bool mine) {
  int in = mine ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return out == 1;
}

}  // namespace loopgate
