// The loop's module tap and digested groups (digest_taps.h).
#include "trainer/loop/digest_taps.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>

#include "trainer/common/error.h"
#include "trainer/loop/mutation.h"
#include "trainer/parallel/recorded_comm.h"

namespace loopgate {
namespace {

class LoopTap final : public ModuleTap {
 public:
  LoopTap(const Arm* const* arm, DigestLog* log) : arm_(arm), log_(log) {}
  at::Tensor at(const ModuleSite& site, Boundary b, at::Tensor t) override {
    t = (*arm_)->mutated().module_boundary(site, b, std::move(t));
    const bool input = b == Boundary::kForwardInput || b == Boundary::kBackwardInput;
    if (log_) log_->add(name_id(site), input ? "input" : "output", t);
    return t;
  }

 private:
  // The site's name, built once per site (sites are few; boundaries are ~1,000 an iteration).
  DigestLog::NameId name_id(const ModuleSite& site) {
    std::lock_guard<std::mutex> lock(mu_);  // backward boundaries arrive on autograd's thread on a GPU
    auto [it, added] = ids_.try_emplace({site.layer, site.module}, 0);
    if (added) it->second = log_->name_id(module_name(site));
    return it->second;
  }

  const Arm* const* arm_;
  DigestLog* log_;
  std::mutex mu_;
  std::map<std::pair<int, const char*>, DigestLog::NameId> ids_;  // module names are string literals
};

// While the log is off (`ab --arms A,A:digests`, A's phases) every call goes straight through: no name is built.
class DigestedComm final : public ForwardingComm {
 public:
  DigestedComm(CommPtr inner, const std::string& kind, std::shared_ptr<DigestLog> log)
      : ForwardingComm(std::move(inner)), label_(group_label(*inner_, kind)), log_(std::move(log)) {}
  void all_reduce(at::Tensor& t, ReduceOp op) override {
    if (!log_->enabled()) return inner_->all_reduce(t, op);
    const std::string n = name(fmt::format("all_reduce.{}", reduce_op_name(op)));
    log_->add(n, "input", t.clone());  // in place: the input is gone after the call
    inner_->all_reduce(t, op);
    log_->add(n, "output", t);
  }
  at::Tensor all_gather(const at::Tensor& t) override {
    if (!log_->enabled()) return inner_->all_gather(t);
    const std::string n = name("all_gather");
    log_->add(n, "input", t);
    at::Tensor out = inner_->all_gather(t);
    log_->add(n, "output", out);
    return out;
  }
  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op) override {
    if (!log_->enabled()) return inner_->reduce_scatter(t, op);
    const std::string n = name(fmt::format("reduce_scatter.{}", reduce_op_name(op)));
    log_->add(n, "input", t);
    at::Tensor out = inner_->reduce_scatter(t, op);
    log_->add(n, "output", out);
    return out;
  }
  void broadcast(at::Tensor& t, int root) override {
    if (!log_->enabled()) return inner_->broadcast(t, root);
    const std::string n = name("broadcast");
    log_->add(n, "input", t.clone());
    inner_->broadcast(t, root);
    log_->add(n, "output", t);
  }
  void send(const at::Tensor& t, int peer) override {
    if (!log_->enabled()) return inner_->send(t, peer);
    log_->add(name(fmt::format("send.{}", world_ranks().at(static_cast<size_t>(peer)))), "input", t);
    inner_->send(t, peer);
  }
  void recv(at::Tensor& t, int peer) override {
    inner_->recv(t, peer);
    if (!log_->enabled()) return;
    log_->add(name(fmt::format("recv.{}", world_ranks().at(static_cast<size_t>(peer)))), "output", t);
  }
  void send_recv(const at::Tensor& s, int sp, at::Tensor& r, int rp) override {
    if (!log_->enabled()) return inner_->send_recv(s, sp, r, rp);
    log_->add(name(fmt::format("send.{}", world_ranks().at(static_cast<size_t>(sp)))), "input", s);
    inner_->send_recv(s, sp, r, rp);
    log_->add(name(fmt::format("recv.{}", world_ranks().at(static_cast<size_t>(rp)))), "output", r);
  }

 private:
  std::string name(const std::string& op) const { return fmt::format("{}.{}@{}", label_, op, current_scope()); }

  std::string label_;
  std::shared_ptr<DigestLog> log_;
};

}  // namespace

std::unique_ptr<ModuleTap> make_loop_tap(const Arm* const* arm, DigestLog* log) {
  return std::make_unique<LoopTap>(arm, log);
}

ProcessGroups digested_groups(const ProcessGroups& g, const std::shared_ptr<DigestLog>& log) {
  auto d = [&](const CommPtr& c, const char* kind) { return std::make_shared<DigestedComm>(c, kind, log); };
  return {d(g.world, "world"), d(g.tp, "tp"), d(g.dp, "dp"), d(g.pp, "pp"), d(g.mp, "mp")};
}

}  // namespace loopgate
