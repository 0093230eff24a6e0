// The factories of capture.h: the CUDA capture session and iteration graph in the GPU tier (capture_cuda.cpp), the
// CPU stand-in that checks operator streams (op_stream.h) otherwise. A file of its own, so that capture.h's unit
// and op_stream.h's do not include each other.
#include "trainer/common/error.h"
#include "trainer/capture/capture.h"
#include "trainer/capture/op_stream.h"

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

}  // namespace loopgate
