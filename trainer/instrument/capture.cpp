// The capture probe's plain-C++ side: the verdict line, the MPI vote, and the session factory (the CUDA session
// lives in capture_cuda.cpp, GPU builds only; region names and the spec parser in capture_spec.cpp).
#include "trainer/instrument/capture.h"

#include <fmt/format.h>
#include <mpi.h>

#include "trainer/common/error.h"
#include "trainer/instrument/op_stream.h"

namespace loopgate {

#if LOOPGATE_HAS_CUDA
std::unique_ptr<CaptureSession> make_cuda_capture_session();  // capture_cuda.cpp
std::unique_ptr<IterationGraph> make_cuda_iteration_graph();
std::unique_ptr<CaptureSession> make_capture_session() { return make_cuda_capture_session(); }
std::unique_ptr<IterationGraph> make_iteration_graph(bool cuda) {
  return cuda ? make_cuda_iteration_graph() : make_op_stream_check_graph();
}
#else
std::unique_ptr<CaptureSession> make_capture_session() { return nullptr; }
std::unique_ptr<IterationGraph> make_iteration_graph(bool cuda) {
  LG_CHECK(!cuda, "--cuda-graph iteration on a CUDA device: this loopgate was built without the GPU tier");
  return make_op_stream_check_graph();
}
#endif

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
