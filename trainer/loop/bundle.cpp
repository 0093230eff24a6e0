// The batched read (bundle.h).
#include "trainer/loop/bundle.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <limits>

#include "trainer/common/device.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {
constexpr double kNanInTheMax = std::numeric_limits<double>::max();  // a NaN through the batched read's MAX
}  // namespace

void Bundle::add(const std::string& key, const at::Tensor& value) {
  LG_CHECK(value.numel() == 1, "bundle value {} has {} elements", key, value.numel());
  keys_.push_back(key);
  parts_.push_back({value.reshape({1}), {}});
}

void Bundle::add_all(const std::string& prefix, const at::Tensor& values) {
  for (int64_t i = 0; i < values.numel(); ++i) keys_.push_back(fmt::format("{}@{}", prefix, i));
  parts_.push_back({values.reshape({-1}), {}});
}

void Bundle::add_host(const std::string& key, double value) {
  keys_.push_back(key);
  if (parts_.empty() || parts_.back().device.defined()) parts_.push_back({});
  parts_.back().host.push_back(value);
}

void Bundle::add_absent(const std::string& key) { add_host(key, -std::numeric_limits<double>::infinity()); }

at::Tensor Bundle::packed() const {
  // Consecutive device values of one dtype are joined, then cast to double once; host runs are uploaded.
  std::vector<at::Tensor> t, run;
  auto flush = [&] {
    if (run.empty()) return;
    t.push_back((run.size() == 1 ? run[0] : at::cat(run)).to(at::kDouble));
    run.clear();
  };
  for (const Part& p : parts_) {
    if (!p.device.defined()) {
      flush();
      t.push_back(upload(p.host, on_run_device(at::kDouble)));
      continue;
    }
    if (!run.empty() && run.back().scalar_type() != p.device.scalar_type()) flush();
    run.push_back(p.device);
  }
  flush();
  return t.size() == 1 ? t[0] : at::cat(t);
}

std::map<std::string, double> Bundle::resolve(AsyncRead& read, Comm& world, bool reduce) {
  issue(read, world, reduce);
  return land(read);
}

void Bundle::issue(AsyncRead& read, Comm& world, bool reduce) {
  at::Tensor packed = this->packed();
  if (reduce) {
    // The MAX must keep a NaN (a NaN loss is what the baseline logs). NCCL's max drops a NaN against -inf (on
    // 2 x H200, pp2: a NaN loss on the last stage was logged as -inf), Open MPI's keeps it; so a NaN rides as the
    // largest finite double, which no logged value reaches, and every backend gives the same answer. (Only +inf
    // beats it: a key that is NaN on one rank and +inf on another reads +inf. The loop's keys never are.)
    packed = at::nan_to_num(packed, kNanInTheMax, std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity());
    world.all_reduce(packed, ReduceOp::kMax);
  }
  read.issue(packed);
}

std::map<std::string, double> Bundle::land(AsyncRead& read) const {
  read.wait();
  std::vector<double> host = read.values();
  for (double& x : host)
    if (x == kNanInTheMax) x = std::numeric_limits<double>::quiet_NaN();
  std::map<std::string, double> out;
  for (size_t i = 0; i < keys_.size(); ++i) out[keys_[i]] = host[i];
  return out;
}

}  // namespace loopgate
