// The fingerprinted group (checked_comm.h).
#include "trainer/parallel/checked_comm.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cstring>

#include "trainer/common/device.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

enum Op : int64_t { kAllReduce = 1, kAllGather, kReduceScatter, kBroadcast, kBarrier };
constexpr int64_t kFields = 5;  // op, dtype, numel, collective number, site hash

const char* op_name(int64_t op) {
  switch (op) {
    case kAllReduce: return "all_reduce";
    case kAllGather: return "all_gather";
    case kReduceScatter: return "reduce_scatter";
    case kBroadcast: return "broadcast";
    case kBarrier: return "barrier";
  }
  return "?";
}

int64_t site_hash(const char* site) {  // FNV-1a of the site's name, kept below 2^53 (exact as a double too)
  uint64_t h = 1469598103934665603ULL;
  for (const char* p = site ? site : ""; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ULL;
  return static_cast<int64_t>(h >> 11);
}

class CheckedComm final : public ForwardingComm {
 public:
  CheckedComm(CommPtr inner, std::string name) : ForwardingComm(std::move(inner)), name_(std::move(name)) {}
  void all_reduce(at::Tensor& t, ReduceOp op) override {
    agree(kAllReduce, t);
    inner_->all_reduce(t, op);
  }
  at::Tensor all_gather(const at::Tensor& t) override {
    agree(kAllGather, t);
    return inner_->all_gather(t);
  }
  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op) override {
    agree(kReduceScatter, t);
    return inner_->reduce_scatter(t, op);
  }
  void broadcast(at::Tensor& t, int root) override {
    agree(kBroadcast, t);
    inner_->broadcast(t, root);
  }
  void barrier() override {
    agree(kBarrier, at::Tensor());
    inner_->barrier();
  }
  void restart(const CommOptions& options) override {
    inner_->restart(options);
    issued_ = 0;
  }

 private:
  // One all-gather of every rank's fingerprint, read on the host and compared.
  void agree(int64_t op, const at::Tensor& t) {
    const int64_t mine[kFields] = {op, t.defined() ? static_cast<int64_t>(t.scalar_type()) : -1,
                                   t.defined() ? t.numel() : 0, issued_++, site_hash(current_site())};
    at::Tensor fp = at::empty({kFields}, at::kLong);
    std::memcpy(fp.data_ptr<int64_t>(), mine, sizeof(mine));
    fp = fp.to(run_device());  // the group's tensors live on the run's device
    const at::Tensor all = inner_->all_gather(fp).to(at::kCPU).contiguous();
    const int64_t* v = all.data_ptr<int64_t>();
    std::string diff;
    for (int r = 0; r < size(); ++r) {
      const int64_t* theirs = v + r * kFields;
      if (std::memcmp(theirs, mine, sizeof(mine)) == 0) continue;
      diff += fmt::format("; rank {} (world {}) issued {}{}", r, world_ranks().at(static_cast<size_t>(r)),
                          describe(theirs), theirs[4] != mine[4] ? " from another site" : "");
    }
    LG_CHECK(diff.empty(), "collective mismatch on group {}: this rank (world {}) issued {} at site '{}'{}", name_,
             world_ranks().at(static_cast<size_t>(rank())), describe(mine), current_site() ? current_site() : "",
             diff);
  }
  std::string describe(const int64_t* f) const {
    const std::string what = f[1] < 0 ? "" : fmt::format("{} x {}", f[2], c10::toString(static_cast<at::ScalarType>(f[1])));
    return fmt::format("{}({}{}{}, collective #{})", op_name(f[0]), name_, what.empty() ? "" : ", ", what, f[3]);
  }

  std::string name_;
  int64_t issued_ = 0;  // collectives issued on this group (the fingerprint's number)
};

}  // namespace

CommPtr checked_comm(CommPtr inner, const std::string& name) {
  return std::make_shared<CheckedComm>(std::move(inner), name);
}

ProcessGroups checked_groups(const ProcessGroups& g) {
  return {checked_comm(g.world, "world"), checked_comm(g.tp, "tp"), checked_comm(g.dp, "dp"), checked_comm(g.pp, "pp"),
          checked_comm(g.mp, "mp")};
}

}  // namespace loopgate
