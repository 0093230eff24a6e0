// MpiComm: Comm over MPI for CPU tensors. Float sums in kFixed/kPermuted order are done as gather + local
// adds in a chosen order, so their bits do not depend on Open MPI's algorithm selection.
#include "trainer/parallel/comm_mpi.h"

#include <ATen/ATen.h>

#include <numeric>
#include <random>

#include "trainer/common/error.h"
#include "trainer/common/uncounted_operators.h"

namespace loopgate {

MpiGroup::MpiGroup(MPI_Comm c, bool o) : comm(c), own(o) {
  // An MPI error (a collective whose sizes differ between ranks: MPI_ERR_TRUNCATE) comes back as a return code,
  // so LG_MPI_CHECK throws a loopgate::Error naming this rank and the call, instead of MPI's fatal handler
  // aborting with a process id nobody can map to a rank.
  LG_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  LG_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  LG_MPI_CHECK(MPI_Comm_size(comm, &size));
  // Map group ranks to world ranks once (for messages and tests).
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  world_ranks.resize(size);
  LG_MPI_CHECK(MPI_Allgather(&world_rank, 1, MPI_INT, world_ranks.data(), 1, MPI_INT, comm));
}

MpiGroup::~MpiGroup() {
  if (!own) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm);
}

namespace {

MPI_Datatype mpi_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kChar: return MPI_INT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

// For pure data movement any dtype travels as bytes.
int byte_count(const at::Tensor& t) {
  int64_t n = t.numel() * static_cast<int64_t>(t.element_size());
  LG_CHECK(n < INT32_MAX, "message of {} bytes too large for one MPI call", n);
  return static_cast<int>(n);
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

class MpiComm final : public Comm {
 public:
  MpiComm(MPI_Comm comm, CommOptions options, bool own) : g_(comm, own), options_(options) {}

  const char* backend() const override { return "mpi"; }
  int rank() const override { return g_.rank; }
  int size() const override { return g_.size; }
  const std::vector<int>& world_ranks() const override { return g_.world_ranks; }
  int64_t calls() const override { return calls_; }
  void restart(const CommOptions& options) override {
    options_ = options;
    calls_ = 0;
  }

  void all_reduce(at::Tensor& t, ReduceOp op) override {
    check_tensor(t, "all_reduce");
    ++calls_;
    note_progress();
    if (g_.size == 1) return;
    bool ordered = op == ReduceOp::kSum && options_.order != ReduceOrder::kNative && t.is_floating_point();
    if (ordered) {
      UncountedOperators transport;  // the sum and the copy back: MPI's native sum lands in place
      t.copy_(ordered_sum(t));
      return;
    }
    at::Tensor work = reducible(t);
    LG_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, work.data_ptr(), static_cast<int>(work.numel()), mpi_type(work),
                               mpi_op(op), g_.comm));
    if (!work.is_same(t)) t.copy_(work);
  }

  at::Tensor all_gather(const at::Tensor& t) override {
    check_tensor(t, "all_gather");
    ++calls_;
    note_progress();
    return gather_raw(t);
  }

  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op) override {
    check_tensor(t, "reduce_scatter");
    LG_CHECK(t.dim() >= 1 && t.size(0) % g_.size == 0, "reduce_scatter: dim 0 ({}) not divisible by group size {}",
             t.dim() ? t.size(0) : 0, g_.size);
    ++calls_;
    note_progress();
    if (g_.size == 1) return t.clone();
    int64_t chunk = t.size(0) / g_.size;
    bool ordered = op == ReduceOp::kSum && options_.order != ReduceOrder::kNative && t.is_floating_point();
    if (ordered) {
      UncountedOperators transport;
      return ordered_sum(t).narrow(0, g_.rank * chunk, chunk).clone();
    }
    at::Tensor work = reducible(t);
    std::vector<int64_t> shape = work.sizes().vec();
    shape[0] = chunk;
    at::Tensor out = at::empty(shape, work.options());
    LG_MPI_CHECK(MPI_Reduce_scatter_block(work.data_ptr(), out.data_ptr(), static_cast<int>(out.numel()),
                                          mpi_type(work), mpi_op(op), g_.comm));
    return out.to(t.scalar_type());
  }

  void broadcast(at::Tensor& t, int root) override {
    check_tensor(t, "broadcast");
    ++calls_;
    note_progress();
    if (g_.size == 1) return;
    LG_MPI_CHECK(MPI_Bcast(t.data_ptr(), byte_count(t), MPI_BYTE, root, g_.comm));
  }

  void send(const at::Tensor& t, int peer) override {
    check_tensor(t, "send");
    ++calls_;
    note_progress();
    LG_MPI_CHECK(MPI_Send(t.data_ptr(), byte_count(t), MPI_BYTE, peer, kTag, g_.comm));
  }

  void recv(at::Tensor& t, int peer) override {
    check_tensor(t, "recv");
    ++calls_;
    note_progress();
    LG_MPI_CHECK(MPI_Recv(t.data_ptr(), byte_count(t), MPI_BYTE, peer, kTag, g_.comm, MPI_STATUS_IGNORE));
  }

  void send_recv(const at::Tensor& s, int send_peer, at::Tensor& r, int recv_peer) override {
    check_tensor(s, "send_recv");
    check_tensor(r, "send_recv");
    ++calls_;
    note_progress();
    LG_MPI_CHECK(MPI_Sendrecv(s.data_ptr(), byte_count(s), MPI_BYTE, send_peer, kTag, r.data_ptr(), byte_count(r),
                              MPI_BYTE, recv_peer, kTag, g_.comm, MPI_STATUS_IGNORE));
  }

  void barrier() override {
    ++calls_;
    note_progress();
    LG_MPI_CHECK(MPI_Barrier(g_.comm));
  }

 private:
  static constexpr int kTag = 7;

  void check_tensor(const at::Tensor& t, const char* op) const {
    LG_CHECK(t.defined(), "MpiComm::{}: undefined tensor", op);
    LG_CHECK(t.device().is_cpu(), "MpiComm::{}: tensor on {} (the mpi backend takes CPU tensors)", op,
             t.device().str());
    LG_CHECK(t.is_contiguous(), "MpiComm::{}: tensor not contiguous", op);
  }

  // Bool has no MPI reduction: reduce it as uint8 (SUM then means count, MAX = any, MIN = all).
  static at::Tensor reducible(const at::Tensor& t) {
    if (t.scalar_type() == at::kBool) return t.to(at::kByte);
    LG_CHECK(mpi_type(t) != MPI_DATATYPE_NULL, "MpiComm: no MPI reduction for dtype {}",
             std::string(c10::toString(t.scalar_type())));
    return t;
  }

  at::Tensor gather_raw(const at::Tensor& t) {
    std::vector<int64_t> shape = t.dim() == 0 ? std::vector<int64_t>{1} : t.sizes().vec();
    shape[0] *= g_.size;
    at::Tensor out = at::empty(shape, t.options());
    LG_MPI_CHECK(MPI_Allgather(t.data_ptr(), byte_count(t), MPI_BYTE, out.data_ptr(), byte_count(t), MPI_BYTE, g_.comm));
    return out;
  }

  // Sum of every rank's t, added one rank at a time in a fixed or per-call permuted order. Large tensors are
  // summed a slice per rank (all-to-all, ordered sum of my slice, all-gather of the slices): the same order for
  // every element, so the same bits as summing the whole gather, at 1/size of the traffic (64 ranks on 2 cores).
  // Its callers hold an UncountedOperators scope around it and what they do with its result: the transport's own
  // adds are counted as MPI's native sum is, not at all.
  at::Tensor ordered_sum(const at::Tensor& t) {
    const int64_t n = t.numel();
    if (n < kSliceMin * g_.size)
      return sum_in_order(gather_raw(t.contiguous()).view({g_.size, n}), options_, calls_).view(t.sizes());
    const int64_t slice = (n + g_.size - 1) / g_.size;
    at::Tensor padded = at::zeros({g_.size * slice}, t.options());
    padded.narrow(0, 0, n).copy_(t.reshape({n}));
    at::Tensor mine = at::empty({g_.size, slice}, t.options());  // row r: rank r's values of my slice
    const int bytes = static_cast<int>(slice * t.element_size());
    LG_MPI_CHECK(MPI_Alltoall(padded.data_ptr(), bytes, MPI_BYTE, mine.data_ptr(), bytes, MPI_BYTE, g_.comm));
    at::Tensor part = sum_in_order(mine, options_, calls_).contiguous();
    at::Tensor whole = at::empty({g_.size * slice}, t.options());
    LG_MPI_CHECK(MPI_Allgather(part.data_ptr(), bytes, MPI_BYTE, whole.data_ptr(), bytes, MPI_BYTE, g_.comm));
    return whole.narrow(0, 0, n).view(t.sizes());
  }
  static constexpr int64_t kSliceMin = 64;  // below 64 elements per rank the plain gather is cheaper

  MpiGroup g_;
  CommOptions options_;
  int64_t calls_ = 0;
};

// Splits `base` so that ranks with the same color land together; key keeps world order.
CommPtr split(MPI_Comm base, int color, int key, const CommOptions& options, CommOverMpi make) {
  MPI_Comm out;
  LG_MPI_CHECK(MPI_Comm_split(base, color, key, &out));
  return make(out, options, /*own=*/true);
}

}  // namespace

CommPtr make_mpi_comm(MPI_Comm comm, const CommOptions& options, bool own) {
  return std::make_shared<MpiComm>(comm, options, own);
}

ProcessGroups make_mpi_groups(const Layout& layout, MPI_Comm base, const CommOptions& options) {
  return split_groups(layout, base, options, &make_mpi_comm);
}

ProcessGroups split_groups(const Layout& layout, MPI_Comm base, const CommOptions& options, CommOverMpi make) {
  int rank = 0, size = 0;
  LG_MPI_CHECK(MPI_Comm_rank(base, &rank));
  LG_MPI_CHECK(MPI_Comm_size(base, &size));
  LG_CHECK(size == layout.world(), "layout world {} != communicator size {}", layout.world(), size);
  ProcessGroups g;
  MPI_Comm world_dup;
  LG_MPI_CHECK(MPI_Comm_dup(base, &world_dup));  // our own context: no clash with the harness's collectives
  g.world = make(world_dup, options, /*own=*/true);
  const Layout::GroupColors colors = layout.group_colors(rank);
  g.tp = split(base, colors.tp, rank, options, make);
  g.dp = split(base, colors.dp, rank, options, make);
  g.pp = split(base, colors.pp, rank, options, make);
  g.mp = split(base, colors.mp, rank, options, make);
  return g;
}

}  // namespace loopgate
