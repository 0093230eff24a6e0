// The recording group (recorded_comm.h).
#include "trainer/parallel/recorded_comm.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "trainer/common/error.h"

namespace loopgate {

namespace {
// The records alive now, newest last, for live_collective_where (the watchdog's thread reads them).
std::mutex g_live_mu;
std::vector<const CollectiveLog*> g_live;
// The last record that failed in a call, as it stood then: the throw unwinds the run and its record before the
// harness aborts the job, and the abort still names the call. Cleared by the next record made.
struct FailedRecord {
  std::string where;
  std::vector<CollectiveCall> recent;
};
FailedRecord g_failed;
}  // namespace

CollectiveLog::CollectiveLog() {
  hook_ = add_abort_hook([this] {
    std::fprintf(stderr, "loopgate collectives: rank %d: %s\n", world_rank_for_errors(), where().c_str());
    std::fflush(stderr);
  });
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live.push_back(this);
  g_failed = {};
}

CollectiveLog::~CollectiveLog() {
  remove_abort_hook(hook_);
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_live.erase(std::remove(g_live.begin(), g_live.end(), this), g_live.end());
}

std::string live_collective_where() {
  std::lock_guard<std::mutex> lock(g_live_mu);
  return g_live.empty() ? g_failed.where : g_live.back()->where();
}

std::vector<CollectiveCall> live_collective_recent() {
  std::lock_guard<std::mutex> lock(g_live_mu);
  return g_live.empty() ? g_failed.recent : g_live.back()->recent();
}

std::vector<CollectiveCall> CollectiveLog::recent() const {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);  // as where(): never wait on a blocked rank's lock
  if (!lock.owns_lock()) return {};
  std::vector<CollectiveCall> out;
  for (size_t i = 0; i < ring_.size(); ++i) out.push_back(ring_[(next_ + i) % ring_.size()]);
  return out;
}

std::string parted_ranks(const std::map<int, std::string>& where) {
  bool waiting = false;
  for (const auto& [rank, place] : where) {
    if (place.empty() || place == "the record is busy") return "";
    waiting = waiting || place.rfind("waiting in ", 0) == 0 || place.rfind("failed in ", 0) == 0;
  }
  if (!waiting || where.empty()) return "";
  const std::string& first = where.begin()->second;
  if (std::all_of(where.begin(), where.end(), [&](const auto& rp) { return rp.second == first; })) return "";
  std::vector<std::string> parts;
  for (const auto& [rank, place] : where) parts.push_back(fmt::format("rank {} {}", rank, place));
  return fmt::format("{}", fmt::join(parts, "; "));
}

void CollectiveLog::add(int64_t iteration, CollectiveCall call) {
  std::lock_guard<std::mutex> lock(mu_);
  failed_.clear();
  last_ = call;
  last_iteration_ = iteration;
  any_ = inside_ = true;
  if (ring_.size() < kRecent) ring_.push_back(call);
  else ring_[next_ % kRecent] = call;
  ++next_;
  calls_[iteration].push_back(std::move(call));
}

void CollectiveLog::done() {
  std::lock_guard<std::mutex> lock(mu_);
  inside_ = false;
}

void CollectiveLog::failed(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inside_ = false;
    failed_ = why.substr(0, why.find('\n'));
    if (failed_.empty()) failed_ = "an error";
  }
  std::fprintf(stderr, "loopgate collectives: rank %d: %s\n", world_rank_for_errors(), where().c_str());
  std::fflush(stderr);
  FailedRecord snapshot{where(), recent()};
  std::lock_guard<std::mutex> lock(g_live_mu);
  g_failed = std::move(snapshot);
}

std::string CollectiveLog::where() const {
  // From the watchdog's thread while this rank's own thread may be blocked in a call (never inside add: it only
  // appends): a lock that is not free at once is reported, not waited for.
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return "the record is busy";
  if (!any_) return "in no collective; none issued yet";
  const std::string call = fmt::format("{} (iteration {})", to_string(last_), last_iteration_ + 1);
  if (!failed_.empty()) return "failed in " + call + ": " + failed_;
  return inside_ ? "waiting in " + call : "in no collective; the last: " + call;
}

std::vector<CollectiveCall> CollectiveLog::take(int64_t iteration) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find(iteration);
  if (it == calls_.end()) return {};
  std::vector<CollectiveCall> out = std::move(it->second);
  calls_.erase(it);
  return out;
}

std::string mismatched_call(const std::map<int, std::string>& where) {
  static const char* const kPrefixes[] = {"waiting in ", "failed in ", "in no collective; the last: "};
  std::map<int, std::vector<CollectiveCall>> calls;
  for (const auto& [rank, place] : where) {
    for (const char* prefix : kPrefixes) {
      if (place.rfind(prefix, 0) != 0) continue;
      const std::string rest = place.substr(std::strlen(prefix));
      const size_t it = rest.find(" (iteration ");
      if (it == std::string::npos) break;
      try {
        calls[rank].push_back(parse_collective_call(rest.substr(0, it)));
      } catch (const InputError&) {
      }
      break;
    }
  }
  return mismatched_recent_calls(calls);
}

std::string mismatched_recent_calls(const std::map<int, std::vector<CollectiveCall>>& recent) {
  std::map<std::tuple<std::string, std::string, int64_t>, std::map<int, CollectiveCall>> same;  // (group, op, seq)
  for (const auto& [rank, calls] : recent)
    for (const CollectiveCall& c : calls)
      if (!c.transfer()) same[{c.group, c.op, c.seq}][rank] = c;
  for (const auto& [key, calls] : same) {
    const CollectiveCall& first = calls.begin()->second;
    const bool differ = std::any_of(calls.begin(), calls.end(), [&](const auto& rc) {
      return rc.second.count != first.count || rc.second.dtype != first.dtype;
    });
    if (!differ) continue;
    std::vector<std::string> sizes;
    for (const auto& [rank, c] : calls) sizes.push_back(fmt::format("rank {} {}[{}]", rank, c.dtype, c.count));
    return fmt::format("size mismatch in {} {} #{}: {}", std::get<0>(key), std::get<1>(key), std::get<2>(key),
                       fmt::join(sizes, ", "));
  }
  return "";
}

std::string group_label(const Comm& c, const std::string& kind) {
  const std::vector<int>& w = c.world_ranks();
  return fmt::format("{}#{}", kind, w.empty() ? 0 : *std::min_element(w.begin(), w.end()));
}

namespace {

class RecordedComm final : public ForwardingComm {
 public:
  RecordedComm(CommPtr inner, const std::string& kind, std::shared_ptr<CollectiveLog> log)
      : ForwardingComm(std::move(inner)), name_(group_label(*inner_, kind)), log_(std::move(log)) {}
  void all_reduce(at::Tensor& t, ReduceOp op) override {
    collective(fmt::format("all_reduce.{}", reduce_op_name(op)), t);
    issued([&] { inner_->all_reduce(t, op); });
  }
  at::Tensor all_gather(const at::Tensor& t) override {
    collective("all_gather", t);
    return issued([&] { return inner_->all_gather(t); });
  }
  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op) override {
    collective(fmt::format("reduce_scatter.{}", reduce_op_name(op)), t);
    return issued([&] { return inner_->reduce_scatter(t, op); });
  }
  void broadcast(at::Tensor& t, int root) override {
    collective("broadcast", t, world(root));
    issued([&] { inner_->broadcast(t, root); });
  }
  void send(const at::Tensor& t, int peer) override {
    transfer("send", t, peer);
    issued([&] { inner_->send(t, peer); });
  }
  void recv(at::Tensor& t, int peer) override {
    transfer("recv", t, peer);
    issued([&] { inner_->recv(t, peer); });
  }
  void send_recv(const at::Tensor& s, int sp, at::Tensor& r, int rp) override {
    transfer("send", s, sp);
    transfer("recv", r, rp);
    issued([&] { inner_->send_recv(s, sp, r, rp); });
  }
  void barrier() override {
    collective("barrier", at::Tensor());
    issued([&] { inner_->barrier(); });
  }
  void restart(const CommOptions& options) override {
    inner_->restart(options);
    collectives_ = 0;
    transfers_.clear();
  }

 private:
  // The inner call, then done(); a throw marks the record failed (so the abort names the call) and goes on.
  template <class F>
  auto issued(F&& f) -> decltype(f()) {
    try {
      if constexpr (std::is_void_v<decltype(f())>) {
        f();
        log_->done();
      } else {
        auto out = f();
        log_->done();
        return out;
      }
    } catch (const std::exception& e) {
      log_->failed(e.what());
      throw;
    }
  }
  int world(int group_rank) const { return inner_->world_ranks().at(static_cast<size_t>(group_rank)); }
  void collective(std::string op, const at::Tensor& t, int root = -1) {
    add(std::move(op), t, root, collectives_++);
  }
  void transfer(const char* op, const at::Tensor& t, int peer) {
    const int w = world(peer);
    add(op, t, w, transfers_[{op[0] == 's', w}]++);
  }
  void add(std::string op, const at::Tensor& t, int peer, int64_t seq) {
    CollectiveCall c;
    c.group = name_;
    c.op = std::move(op);
    c.dtype = t.defined() ? c10::toString(t.scalar_type()) : "";
    c.count = t.defined() ? t.numel() : 0;
    c.peer = peer;
    c.seq = seq;
    c.scope = current_scope();
    log_->add(current_iteration(), std::move(c));
  }

  std::string name_;
  std::shared_ptr<CollectiveLog> log_;
  int64_t collectives_ = 0;
  std::map<std::pair<bool, int>, int64_t> transfers_;  // (send?, peer) -> transfers so far
};

}  // namespace

CommPtr recorded_comm(CommPtr inner, const std::string& kind, std::shared_ptr<CollectiveLog> log) {
  return std::make_shared<RecordedComm>(std::move(inner), kind, std::move(log));
}

ProcessGroups recorded_groups(const ProcessGroups& g, const std::shared_ptr<CollectiveLog>& log) {
  return {recorded_comm(g.world, "world", log), recorded_comm(g.tp, "tp", log), recorded_comm(g.dp, "dp", log),
          recorded_comm(g.pp, "pp", log), recorded_comm(g.mp, "mp", log)};
}

std::vector<std::string> recorded_group_names(const ProcessGroups& g) {
  return {group_label(*g.world, "world"), group_label(*g.tp, "tp"), group_label(*g.dp, "dp"), group_label(*g.pp, "pp"),
          group_label(*g.mp, "mp")};
}

}  // namespace loopgate
