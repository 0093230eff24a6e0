// Digests (`loopgate run --digests`, RunConfig::digests): a bit-exact integer hash of a tensor, computed on the
// device, for every module boundary, every parameter's grad after reduction and after clipping, the optimizer's
// state after the step, the loss, and every collective's input and output — keyed by iteration, microbatch, phase
// and name, so two runs can be compared record by record and the first one that differs found
// (fixtures/localize.h). Nothing is read during the run: the tensors wait in a batch, each batch is hashed in a
// few kernels per dtype (one concatenation, one multiply by position weights, one segmented sum) into device memory, and
// the host reads every digest once, after the last iteration (a diagnostic read, like the Trace's checksums).
// The hash: the tensor's bits as int32 words w_0..w_n-1 (an 8-byte element is two words, a 2- or 1-byte element
// one), sum over i of w_i * ((i + 1) * 0x9E3779B97F4A7C15 | 1) mod 2^64: a flipped bit or a swapped pair changes it.
#pragma once
#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "trainer/measure/digest_record.h"

namespace loopgate {

class DigestLog {
 public:
  // Off: add() records nothing (`ab --arms A,A:digests` prices the digests in one run). On by default.
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  // The phase and microbatch the next records belong to.
  void set_phase(DigestPhase phase, int microbatch = -1);
  // `t`'s digest at the current iteration (current_iteration()), phase and microbatch. The tensor is kept as it is
  // until flush(): a caller that changes it in place before then passes a copy.
  void add(const std::string& name, const char* what, const at::Tensor& t);
  // Hashes every tensor added since the last flush (a few kernels, no read).
  void flush();
  // Every digest, in the order added (one read of the device buffers; flushes first). Iterations 1-based.
  std::vector<DigestRecord> collect();

 private:
  struct Pending {
    DigestRecord key;
    at::Tensor tensor;  // as added: flattening it is left to flush (one host dispatch fewer per record)
    long same_as = -1;  // the batch's earlier entry holding the same tensor, unchanged (a module's input is
                        // mostly the previous module's output): hashed once
  };
  struct Weights {
    at::Tensor weights, segments;  // per word: its position weight, its record's index in the batch
  };
  const Weights& weights_for(const std::vector<int64_t>& lengths, const at::Device& device);

  std::atomic<bool> enabled_{true};
  std::mutex mu_;  // backward boundaries arrive on autograd's thread on a GPU
  DigestPhase phase_ = DigestPhase::kForward;
  int microbatch_ = -1;
  std::vector<Pending> pending_;
  std::map<const void*, std::pair<int64_t, size_t>> seen_;  // this batch: tensor -> (its version, its entry)
  std::vector<DigestRecord> keys_;     // flushed, in the order added
  std::vector<size_t> source_;         // each key's digest: its place among the hashed tensors
  size_t hashed_ = 0;                  // tensors hashed so far
  std::vector<at::Tensor> digests_;    // per flush: int64 [records of the flush]
  std::map<std::vector<int64_t>, Weights> weights_;  // per batch layout: the same every iteration
};

}  // namespace loopgate
