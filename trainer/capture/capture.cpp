// The capture probe's plain-C++ side: the verdict line and the MPI vote (the factories: capture_factory.cpp; the
// CUDA session: capture_cuda.cpp, GPU builds only; region names and the spec parser: capture_spec.cpp).
#include "trainer/capture/capture.h"

#include <fmt/format.h>
#include <mpi.h>

#include "trainer/common/error.h"

namespace loopgate {

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
