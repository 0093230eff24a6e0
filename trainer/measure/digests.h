// Digests (`loopgate run --digests`, RunConfig::digests): a bit-exact integer hash of a tensor, computed on the
// device, for every module boundary, every parameter's grad after reduction and after clipping, the optimizer's
// state after the step, the loss, and every collective's input and output — keyed by iteration, microbatch, phase
// and name, so two runs can be compared record by record and the first one that differs found
// (fixtures/localize.h). Nothing is read during the run: the tensors wait in a batch, and each batch is hashed by
// one kernel (digest_hash.h: a table of the tensors' addresses, uploaded without a wait; no concatenation, no
// per-tensor op) into device memory — on CPU by the same loop on the host. The host reads every digest once, after
// the last iteration (a diagnostic read, like the Trace's checksums).
#pragma once
#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "trainer/measure/digest_hash.h"
#include "trainer/measure/digest_record.h"

namespace loopgate {

class DigestLog {
 public:
  // A record's name as an index into the log's names: a caller that adds under the same name every iteration
  // looks it up once (a module's, a parameter's), so an add builds no string.
  using NameId = int32_t;
  DigestLog();
  NameId name_id(const std::string& name);
  // Off: add() records nothing (`ab --arms A,A:digests` prices the digests in one run). On by default.
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  // The phase and microbatch the next records belong to.
  void set_phase(DigestPhase phase, int microbatch = -1);
  // `t`'s digest at the current iteration (current_iteration()), phase and microbatch. The tensor is kept as it is
  // until flush(): a caller that changes it in place before then passes a copy. A strided one is copied now.
  // `what` is a string literal ("input", "output").
  void add(NameId name, const char* what, const at::Tensor& t);
  void add(const std::string& name, const char* what, const at::Tensor& t) { add(name_id(name), what, t); }
  // Hashes every tensor added since the last flush (a zero fill and one kernel per device, no read).
  void flush();
  // Every digest, in the order added (one read of the device buffers; flushes first). Iterations 1-based.
  std::vector<DigestRecord> collect();

 private:
  struct Key {  // a DigestRecord without its strings and digest: adding one allocates nothing
    int64_t iteration;
    int microbatch;
    DigestPhase phase;
    NameId name;
    const char* what;
  };
  struct Pending {
    Key key;
    at::Tensor tensor;  // contiguous: the hash reads its memory in place
    at::Tensor added;   // a strided tensor as added: alive to the flush, so no other tensor takes its address and
                        // is taken for it by seen_
    long same_as = -1;  // the batch's earlier entry holding the same tensor, unchanged (a module's input is
                        // mostly the previous module's output): hashed once
  };
  std::atomic<bool> enabled_{true};
  std::mutex mu_;  // backward boundaries arrive on autograd's thread on a GPU
  DigestPhase phase_ = DigestPhase::kForward;
  int microbatch_ = -1;
  std::vector<Pending> pending_;
  std::vector<Pending> batch_;  // the batch being flushed (flush's alone); both keep their capacity
  std::unordered_map<const void*, std::pair<int64_t, size_t>> seen_;  // this batch: tensor -> (its version, its entry)
  std::vector<std::string> names_;  // NameId -> name
  std::unordered_map<std::string, NameId> ids_;
  std::vector<Key> keys_;              // flushed, in the order added
  std::vector<size_t> source_;         // each key's digest: its place among the hashed tensors
  size_t hashed_ = 0;                  // tensors hashed so far
  std::vector<at::Tensor> digests_;    // per flush and device: int64 [tensors hashed there]
};

#if LOOPGATE_HAS_CUDA
// The GPU form of a flush's hash (digests_cuda.cpp): the chunk table uploaded without a wait, then the kernel adds
// into `out` (device int64, zeroed) on the current stream.
void digest_chunks_on_device(const std::vector<DigestChunk>& chunks, const at::Tensor& out);
#endif

}  // namespace loopgate
