// A module boundary of the GPT stage, and who may watch it: the digests (`loopgate run --digests`,
// trainer/measure/digests.h) record each boundary's tensor, and a loop change handed in from outside (a planted
// numerics defect) may replace it. Null on GptStage (the default): the model registers nothing and pays nothing.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>

namespace loopgate {

struct ModuleSite {
  int layer = -1;       // the global layer number; -1 outside the transformer layers
  const char* module;   // "self_attention.linear_proj", "embedding", ... (static storage)
};
// "layers.1.self_attention.linear_proj", or the module alone outside the layers ("embedding").
std::string module_name(const ModuleSite& site);

enum class Boundary {
  kForwardInput,    // the module's input
  kForwardOutput,   // the module's output
  kBackwardInput,   // the grad of its output: what its backward starts from
  kBackwardOutput,  // the grad of its input: what its backward produced
};

class ModuleTap {
 public:
  virtual ~ModuleTap() = default;
  // Sees `t` at `site`'s `boundary` and returns what the model continues with (`t` unless a defect changes it).
  // Backward boundaries are called by autograd (on its device thread on a GPU), during the step's backward.
  virtual at::Tensor at(const ModuleSite& site, Boundary boundary, at::Tensor t) = 0;
};

}  // namespace loopgate
