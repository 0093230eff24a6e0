// ShmComm (comm_shm.h). One file, mapped by every rank of the group: a control block (the barrier, the name of a
// grown segment) and one block per rank holding two parities of {header, input, output slice}. A collective writes
// this rank's header and input, waits once at the barrier, checks that every rank called the same collective with
// the same size, and reads the others' blocks. Two parities let the next collective write while a slow rank still
// reads this one: it cannot get two collectives ahead without passing a barrier the slow rank has not reached.
#include "trainer/parallel/comm_shm.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>

#include "trainer/common/error.h"
#include "trainer/common/uncounted_operators.h"
#include "trainer/parallel/comm_mpi.h"

namespace loopgate {

namespace {

constexpr int64_t kPage = 4096;
constexpr int64_t kHeaderBytes = 64;
constexpr int64_t kFirstCapacity = 256 << 10;  // input bytes per rank and parity; grows by doubling
constexpr int64_t kWholeMax = 256;             // up to this many elements every rank adds every rank's values

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// The barrier's words sit on cache lines of their own; the name is a grown segment's file (grow()).
struct Control {
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) char next_name[256];
};
static_assert(sizeof(Control) <= kPage, "the control block fits its page");

// What a rank says of the collective it is in; every rank's must match.
struct Header {
  int64_t exchange;  // collectives this comm has exchanged before this one
  int32_t kind;      // Kind
  int32_t dtype;     // at::ScalarType
  int64_t bytes;     // of the input
  int64_t root;      // broadcast's root, else -1
};
static_assert(sizeof(Header) <= kHeaderBytes, "a header fits its slot");

enum class Kind : int32_t { kAllReduce = 1, kAllGather, kReduceScatter, kBroadcast, kBarrier };
const char* kind_name(int32_t k) {
  switch (static_cast<Kind>(k)) {
    case Kind::kAllReduce: return "all_reduce";
    case Kind::kAllGather: return "all_gather";
    case Kind::kReduceScatter: return "reduce_scatter";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kBarrier: return "barrier";
  }
  return "?";
}

// Sleeps while *word == value (a shared mapping: no FUTEX_PRIVATE_FLAG). A second's timeout only re-checks.
void futex_wait(std::atomic<uint32_t>* word, uint32_t value) {
  timespec second{1, 0};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, value, &second, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Where a segment's file goes: memory (/dev/shm) when it has room, else TMPDIR or /tmp.
std::string segment_dir(int64_t bytes) {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) == 0 && static_cast<int64_t>(s.f_bavail * s.f_frsize) >= 2 * bytes) return "/dev/shm";
  if (const char* t = std::getenv("TMPDIR")) return t;
  return "/tmp";
}

// One mapped file. The creator names it; every rank maps it; the creator unlinks it once all have.
class Segment {
 public:
  Segment(const std::string& path, int64_t bytes, bool create) : bytes_(bytes) {
    const int fd = create ? ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600) : ::open(path.c_str(), O_RDWR);
    LG_CHECK(fd >= 0, "shm comm: cannot open {}: {}", path, std::strerror(errno));
    if (create && ::ftruncate(fd, bytes) != 0) {
      const int e = errno;
      ::close(fd);
      LG_CHECK(false, "shm comm: cannot size {} to {} bytes: {}", path, bytes, std::strerror(e));
    }
    void* p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    LG_CHECK(p != MAP_FAILED, "shm comm: cannot map {}: {}", path, std::strerror(errno));
    base_ = static_cast<char*>(p);
  }
  ~Segment() { ::munmap(base_, static_cast<size_t>(bytes_)); }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  char* base() const { return base_; }

 private:
  char* base_ = nullptr;
  int64_t bytes_;
};

std::string new_segment_name(int64_t bytes) {
  std::string path = segment_dir(bytes) + "/loopgate-shm-XXXXXX";
  const int fd = ::mkstemp(path.data());
  LG_CHECK(fd >= 0, "shm comm: cannot make a file for a segment in {}: {}", path, std::strerror(errno));
  ::close(fd);
  ::unlink(path.c_str());  // the name only: Segment creates it with O_EXCL
  return path;
}

class ShmComm final : public ForwardingComm {
 public:
  ShmComm(MPI_Comm comm, const CommOptions& options, bool own)
      : ForwardingComm(make_mpi_comm(comm, options, own)), options_(options) {
    rank_ = inner_->rank();
    n_ = inner_->size();
    MPI_Comm node;
    LG_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int on_node = 0;
    MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
    LG_INPUT_CHECK(on_node == n_, "--cpu-comm shm: a group of {} ranks spans hosts ({} on this one); use --cpu-comm mpi",
                   n_, on_node);
    if (n_ == 1) return;  // nothing to share
    set_capacity(kFirstCapacity);
    char name[256] = {0};
    if (rank_ == 0) {  // made before it is named to the others
      std::snprintf(name, sizeof(name), "%s", new_segment_name(segment_bytes()).c_str());
      seg_ = std::make_unique<Segment>(name, segment_bytes(), true);
    }
    LG_MPI_CHECK(MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, comm));
    if (rank_ != 0) seg_ = std::make_unique<Segment>(name, segment_bytes(), false);
    LG_MPI_CHECK(MPI_Barrier(comm));  // every rank has it mapped
    if (rank_ == 0) ::unlink(name);
  }

  const char* backend() const override { return "shm"; }
  int64_t calls() const override { return calls_; }
  void restart(const CommOptions& options) override {
    options_ = options;
    calls_ = 0;
    inner_->restart(options);
  }

  void all_reduce(at::Tensor& t, ReduceOp op) override {
    begin(t, "all_reduce");
    if (n_ == 1) return;
    at::Tensor work = reducible(t);
    exchange(Kind::kAllReduce, work, -1);
    reduce_into(work, op);
    if (!work.is_same(t)) t.copy_(work);
  }

  at::Tensor all_gather(const at::Tensor& t) override {
    begin(t, "all_gather");
    std::vector<int64_t> shape = t.dim() == 0 ? std::vector<int64_t>{1} : t.sizes().vec();
    shape[0] *= n_;
    at::Tensor out = at::empty(shape, t.options());
    if (n_ == 1) {
      UncountedOperators transport;
      return out.copy_(t.reshape(out.sizes()));
    }
    exchange(Kind::kAllGather, t, -1);
    const int64_t bytes = t.numel() * t.element_size();
    for (int r = 0; r < n_; ++r)
      std::memcpy(static_cast<char*>(out.data_ptr()) + r * bytes, input(r), static_cast<size_t>(bytes));
    return out;
  }

  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op) override {
    LG_CHECK(t.dim() >= 1 && t.size(0) % n_ == 0, "reduce_scatter: dim 0 ({}) not divisible by group size {}",
             t.dim() ? t.size(0) : 0, n_);
    begin(t, "reduce_scatter");
    if (n_ == 1) return t.clone();
    at::Tensor work = reducible(t);
    const int64_t chunk = t.size(0) / n_, slice = work.numel() / n_;
    exchange(Kind::kReduceScatter, work, -1);
    std::vector<int64_t> shape = t.sizes().vec();
    shape[0] = chunk;
    at::Tensor mine;
    {
      UncountedOperators transport;
      mine = reduce(rows(work, rank_ * slice, slice), op).view(shape);
    }
    return mine.to(t.scalar_type());
  }

  void broadcast(at::Tensor& t, int root) override {
    begin(t, "broadcast");
    if (n_ == 1) return;
    exchange(Kind::kBroadcast, t, root);
    if (rank_ != root) std::memcpy(t.data_ptr(), input(root), static_cast<size_t>(t.numel() * t.element_size()));
  }

  void barrier() override {
    ++calls_;
    note_progress();
    if (n_ == 1) return;
    exchange(Kind::kBarrier, at::Tensor(), -1);
  }

  // Point to point: MPI's own (bytes moved, nothing added), counted here as MpiComm counts them.
  void send(const at::Tensor& t, int peer) override {
    ++calls_;
    inner_->send(t, peer);
  }
  void recv(at::Tensor& t, int peer) override {
    ++calls_;
    inner_->recv(t, peer);
  }
  void send_recv(const at::Tensor& s, int sp, at::Tensor& r, int rp) override {
    ++calls_;
    inner_->send_recv(s, sp, r, rp);
  }

 private:
  void begin(const at::Tensor& t, const char* op) {
    LG_CHECK(t.defined(), "ShmComm::{}: undefined tensor", op);
    LG_CHECK(t.device().is_cpu(), "ShmComm::{}: tensor on {} (the shm backend takes CPU tensors)", op, t.device().str());
    LG_CHECK(t.is_contiguous(), "ShmComm::{}: tensor not contiguous", op);
    ++calls_;
    note_progress();
  }

  // Bool has no arithmetic of its own: reduced as uint8 (SUM then means count, MAX = any, MIN = all), as MpiComm.
  static at::Tensor reducible(const at::Tensor& t) {
    if (t.scalar_type() == at::kBool) return t.to(at::kByte);
    const at::ScalarType s = t.scalar_type();
    LG_CHECK(s == at::kFloat || s == at::kDouble || s == at::kInt || s == at::kLong || s == at::kByte || s == at::kChar,
             "ShmComm: no reduction for dtype {}", std::string(c10::toString(s)));
    return t;
  }

  // Every rank's values of `work` (this rank's in the segment already) reduced into `work`: small tensors whole on
  // every rank (no second wait), large ones a slice per rank, then every slice copied out.
  void reduce_into(at::Tensor& work, ReduceOp op) {
    UncountedOperators transport;  // the adds are the transport's, as MPI's are inside MPI
    const int64_t numel = work.numel(), size = work.element_size();
    if (numel <= kWholeMax) {
      work.copy_(reduce(rows(work, 0, numel), op).view(work.sizes()));
      return;
    }
    const int64_t slice = (numel + n_ - 1) / n_;
    auto span = [&](int r) { return std::make_pair(std::min(numel, r * slice), std::min(numel, (r + 1) * slice)); };
    const auto [lo, hi] = span(rank_);
    if (hi > lo) {
      at::Tensor mine = reduce(rows(work, lo, hi - lo), op).contiguous();
      std::memcpy(output(rank_), mine.data_ptr(), static_cast<size_t>((hi - lo) * size));
    }
    wait();
    char* dst = static_cast<char*>(work.data_ptr());
    for (int r = 0; r < n_; ++r) {
      const auto [a, b] = span(r);
      if (b > a) std::memcpy(dst + a * size, output(r), static_cast<size_t>((b - a) * size));
    }
  }

  // Elements [from, from + count) of every rank's input, one row per group rank.
  at::Tensor rows(const at::Tensor& like, int64_t from, int64_t count) {
    at::Tensor parts = at::empty({n_, count}, like.options());
    const int64_t size = like.element_size();
    for (int r = 0; r < n_; ++r)
      std::memcpy(static_cast<char*>(parts.data_ptr()) + r * count * size, input(r) + from * size,
                  static_cast<size_t>(count * size));
    return parts;
  }

  // A float sum in sum_in_order's order (the one definition every backend shares); the rest in rank order, where
  // order changes no bits.
  at::Tensor reduce(const at::Tensor& parts, ReduceOp op) {
    if (op == ReduceOp::kSum && parts.is_floating_point()) return sum_in_order(parts, options_, calls_);
    at::Tensor acc = parts[0].clone();
    for (int r = 1; r < n_; ++r) {
      if (op == ReduceOp::kSum) acc.add_(parts[r]);
      if (op == ReduceOp::kMax) acc = at::maximum(acc, parts[r]);
      if (op == ReduceOp::kMin) acc = at::minimum(acc, parts[r]);
    }
    return acc;
  }

  // Writes this rank's header and input, waits for every rank, and checks they called the same collective.
  void exchange(Kind kind, const at::Tensor& t, int root) {
    const int64_t bytes = t.defined() ? t.numel() * t.element_size() : 0;
    parity_ = static_cast<int>(exchanges_ & 1);
    const Header mine{exchanges_, static_cast<int32_t>(kind),
                      t.defined() ? static_cast<int32_t>(t.scalar_type()) : -1, bytes, root};
    const bool writes = kind != Kind::kBroadcast || root == rank_;
    const bool fits = bytes <= capacity_;
    *header(rank_) = mine;
    if (fits && writes && bytes > 0) std::memcpy(input(rank_), t.data_ptr(), static_cast<size_t>(bytes));
    wait();
    ++exchanges_;  // before a mismatch throws too: every rank's next collective takes the other half
    for (int r = 0; r < n_; ++r) {
      const Header h = *header(r);
      LG_CHECK(h.exchange == mine.exchange && h.kind == mine.kind && h.dtype == mine.dtype && h.bytes == mine.bytes &&
                   h.root == mine.root,
               "shm collective mismatch in a group of {}: group rank {} is in {} #{} of {} bytes (dtype {}, root {}), "
               "group rank {} in {} #{} of {} bytes (dtype {}, root {})",
               n_, rank_, kind_name(mine.kind), mine.exchange, mine.bytes, mine.dtype, mine.root, r, kind_name(h.kind),
               h.exchange, h.bytes, h.dtype, h.root);
    }
    if (!fits) {  // every rank knows it now, and grows alike
      grow(bytes);
      *header(rank_) = mine;
      if (writes) std::memcpy(input(rank_), t.data_ptr(), static_cast<size_t>(bytes));
      wait();
    }
  }

  // The barrier: the last rank to arrive wakes the rest; the others sleep in the kernel.
  void wait() {
    Control* c = control();
    const uint32_t generation = c->generation.load();
    if (c->arrived.fetch_add(1) + 1 == static_cast<uint32_t>(n_)) {
      c->arrived.store(0);
      c->generation.fetch_add(1);
      futex_wake_all(&c->generation);
      return;
    }
    while (c->generation.load() == generation) futex_wait(&c->generation, generation);
  }

  // A larger segment for a collective of `bytes`: rank 0 makes it and names it in the old one's control block.
  void grow(int64_t bytes) {
    set_capacity(std::max(2 * capacity_, round_up(bytes, kPage)));
    const int64_t total = segment_bytes();
    if (rank_ == 0) {
      const std::string name = new_segment_name(total);
      LG_CHECK(name.size() < sizeof(Control::next_name), "shm comm: segment path too long: {}", name);
      next_ = std::make_unique<Segment>(name, total, true);
      std::snprintf(control()->next_name, sizeof(Control::next_name), "%s", name.c_str());
    }
    wait();
    const std::string name = control()->next_name;
    if (rank_ != 0) next_ = std::make_unique<Segment>(name, total, false);
    wait();  // every rank has the new one mapped; the old one is read no more
    if (rank_ == 0) ::unlink(name.c_str());
    seg_ = std::move(next_);
  }

  void set_capacity(int64_t capacity) {
    capacity_ = capacity;
    output_capacity_ = round_up(capacity / n_ + 64, 64);
    block_ = round_up(2 * (kHeaderBytes + capacity_ + output_capacity_), kPage);
  }
  int64_t segment_bytes() const { return kPage + n_ * block_; }
  char* block(int r) const { return seg_->base() + kPage + r * block_ + parity_ * (block_ / 2); }
  Control* control() const { return reinterpret_cast<Control*>(seg_->base()); }
  Header* header(int r) const { return reinterpret_cast<Header*>(block(r)); }
  char* input(int r) const { return block(r) + kHeaderBytes; }
  char* output(int r) const { return block(r) + kHeaderBytes + capacity_; }

  CommOptions options_;
  int rank_ = 0, n_ = 1;
  int64_t calls_ = 0;      // every call, as MpiComm counts (kPermuted's order depends on it)
  int64_t exchanges_ = 0;  // collectives through the segment, never restarted
  int parity_ = 0;         // the half of every block the current collective uses: exchanges_ before it, mod 2
  int64_t capacity_ = 0, output_capacity_ = 0, block_ = 0;
  std::unique_ptr<Segment> seg_, next_;
};

}  // namespace

CommPtr make_shm_comm(MPI_Comm comm, const CommOptions& options, bool own) {
  return std::make_shared<ShmComm>(comm, options, own);
}

ProcessGroups make_shm_groups(const Layout& layout, MPI_Comm base, const CommOptions& options) {
  return split_groups(layout, base, options, &make_shm_comm);
}

}  // namespace loopgate
