// Comm: one process group's collectives on LibTorch tensors. Backends: MpiComm (CPU tensors, MPI_Comm_split
// groups) now, NcclComm (CUDA tensors, ncclCommSplit) on GPU runners; callers see only this interface, and
// only trainer/parallel sees MPI_Comm or ncclComm_t . Every method is collective over the group
// (send/recv: over the pair). Ranks and peers are group ranks. Tensors must be contiguous.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loopgate {

enum class ReduceOp { kSum, kMax, kMin };
const char* reduce_op_name(ReduceOp op);  // sum, max, min

// How a floating-point SUM is ordered. kNative: the backend's own algorithm (MPI: deterministic for a fixed
// (np, size, Open MPI) on CPU; shm: rank order, as kFixed). kFixed: gather, then add in group-rank order 0,1,...,n-1 — the same bits for
// any backend algorithm. kPermuted: gather, then add in an order permuted per call from a seed — stands in
// for NCCL's run-to-run order changes (used by the distributional gate).
enum class ReduceOrder { kNative, kFixed, kPermuted };

// Which backend a CPU run's groups use (RunConfig::cpu_comm, `loopgate run --cpu-comm`): MpiComm (comm_mpi.h) or
// ShmComm (comm_shm.h: one host, collectives through shared memory, sums in rank order).
enum class CpuComm { kMpi, kShm };
const char* cpu_comm_name(CpuComm c);  // mpi, shm

struct CommOptions {
  ReduceOrder order = ReduceOrder::kNative;
  uint64_t permute_seed = 0;  // kPermuted only; equal on every rank of the job
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual const char* backend() const = 0;
  virtual int rank() const = 0;  // rank within this group
  virtual int size() const = 0;
  virtual const std::vector<int>& world_ranks() const = 0;  // group rank -> world rank

  // In place. MAX/MIN with a NaN is backend-defined (NCCL drops it): callers that must keep one carry a flag.
  virtual void all_reduce(at::Tensor& t, ReduceOp op = ReduceOp::kSum) = 0;
  // Concatenates every rank's t along dim 0 in group-rank order: result [size*d0, ...].
  virtual at::Tensor all_gather(const at::Tensor& t) = 0;
  // Reduces over the group and returns this rank's dim-0 slice: t.size(0) must divide by size().
  virtual at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op = ReduceOp::kSum) = 0;
  virtual void broadcast(at::Tensor& t, int root) = 0;
  virtual void send(const at::Tensor& t, int peer) = 0;
  virtual void recv(at::Tensor& t, int peer) = 0;  // into t (shape and dtype known to the receiver)
  // Send to one peer and receive from another in one step (no deadlock when both sides send first).
  virtual void send_recv(const at::Tensor& send_t, int send_peer, at::Tensor& recv_t, int recv_peer) = 0;
  virtual void barrier() = 0;

  // Collectives issued so far on this group (all kinds). Lets tests check that two arms issue the same
  // numerics-path collectives.
  virtual int64_t calls() const = 0;

  // Back to a new group's state under `options`: the call counter at 0 (kPermuted's order depends on it). One set
  // of communicators then serves run after run in one process (the gate's scenarios: an NCCL communicator costs
  // ~0.5 s to make). A backend that keeps no other state needs nothing more.
  virtual void restart(const CommOptions& options) = 0;
};

using CommPtr = std::shared_ptr<Comm>;

// A group that hands every call to `inner`: the base of the wrappers that watch some calls (checked_comm.h,
// recorded_comm.h) or, on the test side, change them.
class ForwardingComm : public Comm {
 public:
  explicit ForwardingComm(CommPtr inner) : inner_(std::move(inner)) {}
  const char* backend() const override { return inner_->backend(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::vector<int>& world_ranks() const override { return inner_->world_ranks(); }
  void all_reduce(at::Tensor& t, ReduceOp op) override { inner_->all_reduce(t, op); }
  at::Tensor all_gather(const at::Tensor& t) override { return inner_->all_gather(t); }
  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op) override { return inner_->reduce_scatter(t, op); }
  void broadcast(at::Tensor& t, int root) override { inner_->broadcast(t, root); }
  void send(const at::Tensor& t, int peer) override { inner_->send(t, peer); }
  void recv(at::Tensor& t, int peer) override { inner_->recv(t, peer); }
  void send_recv(const at::Tensor& s, int sp, at::Tensor& r, int rp) override { inner_->send_recv(s, sp, r, rp); }
  void barrier() override { inner_->barrier(); }
  int64_t calls() const override { return inner_->calls(); }
  void restart(const CommOptions& options) override { inner_->restart(options); }

 protected:
  CommPtr inner_;
};

// For backends: the sum of `parts` ([n, numel], one row per group rank) added one row at a time, in rank order
// (kFixed) or in an order permuted from the seed and the group's call counter (kPermuted). One definition, so every
// backend gives the same bits for the same order.
at::Tensor sum_in_order(const at::Tensor& parts, const CommOptions& options, int64_t call);

// The groups one rank belongs to (Megatron's ProcessGroupCollection): passed explicitly, never global.
struct ProcessGroups {
  CommPtr world, tp, dp, pp, mp;
};

}  // namespace loopgate
