// The CPU stand-in for a CUDA graph's replay (`--cuda-graph iteration`). A graph replays the kernels
// captured once, with the host arguments they had then, on the addresses they touched then. Running an iteration
// eagerly computes the same thing only if that iteration dispatches the same operators, with the same host
// arguments, on the same persistent tensors (those that outlive the iteration). On a CPU rank nothing can be
// captured, so the stand-in runs each replayable iteration eagerly and compares its operator stream with the
// captured iteration's: a host value that changes per iteration (an LR or a step count passed as a kernel
// argument), a branch on the iteration, or state reassigned instead of written in place (a graph would keep
// writing the old tensor) each shows as the first operator that differs — what only a GPU replay would reveal
// otherwise, as wrong numbers.
// Recorded per operator (LibTorch RecordFunction, function scope, any thread): its name; per input, a tensor's
// dtype and shape and, for one of the loop's persistent tensors (GraphState), which one; scalars and lists by
// value (doubles in hexfloat). And each persistent tensor must keep its storage from the captured iteration on.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "trainer/capture/capture.h"

namespace loopgate {

class OpStreamRecorder {
 public:
  // Starts recording on every thread (registers the callback; stop() removes it). One recording at a time. A tensor
  // whose storage is one of `state`'s is named by its index there; every other tensor by dtype and shape only
  // (temporaries: a graph's private pool gives them fixed addresses of its own).
  static void start(const GraphState& state);
  // Stops and returns the operators recorded since start(), in dispatch order.
  static std::vector<std::string> stop();
};

// Index of the first entry where `a` and `b` differ (a.size() == b.size() and no difference: npos).
size_t first_difference(const std::vector<std::string>& a, const std::vector<std::string>& b);

// The CPU IterationGraph: the first run records the captured stream; each later run records its own and, on the
// first difference, sets report().error (naming both iterations and the operator) and stops checking. The body
// always runs, so the numerics are the eager ones and no rank waits on another.
std::unique_ptr<IterationGraph> make_op_stream_check_graph();

}  // namespace loopgate
