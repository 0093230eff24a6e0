// The host-read ledger: counting and recording. The source scan that keeps loop code honest is ledger_scan.cpp.
#include "trainer/measure/ledger.h"

#include <map>

#include <ATen/ATen.h>

#include <cstring>

#include "trainer/common/error.h"
#include "trainer/measure/op_counter.h"

namespace loopgate {

// ---- sites ----

namespace {
constexpr std::array<Site, kNumSites> kAllSites = {
    Site::kRerunDecision, Site::kNanCheckLoss, Site::kNanCheckGrad,   Site::kUpdateSuccessful, Site::kGradNorm,
    Site::kNumZeros,      Site::kParamsNorm,   Site::kLossScale,      Site::kLearningRate,     Site::kLossAccumSeed,
    Site::kLossReport,    Site::kTimers,       Site::kExitVote,       Site::kBatchedLogRead,   Site::kOnesyncRead,
};
}  // namespace

const std::array<Site, kNumSites>& all_sites() { return kAllSites; }

const char* site_name(Site site) {
  switch (site) {
    case Site::kRerunDecision: return "rerun_decision";
    case Site::kNanCheckLoss: return "nan_check_loss";
    case Site::kNanCheckGrad: return "nan_check_grad";
    case Site::kUpdateSuccessful: return "update_successful";
    case Site::kGradNorm: return "grad_norm";
    case Site::kNumZeros: return "num_zeros";
    case Site::kParamsNorm: return "params_norm";
    case Site::kLossScale: return "loss_scale";
    case Site::kLearningRate: return "learning_rate";
    case Site::kLossAccumSeed: return "loss_accum_seed";
    case Site::kLossReport: return "loss_report";
    case Site::kTimers: return "timers";
    case Site::kExitVote: return "exit_vote";
    case Site::kBatchedLogRead: return "batched_log_read";
    case Site::kOnesyncRead: return "onesync_read";
  }
  return "unknown_site";
}

std::optional<Site> try_parse_site(const std::string& name) {
  for (Site s : kAllSites)
    if (name == site_name(s)) return s;
  return std::nullopt;
}

Site parse_site(const std::string& name) {
  auto s = try_parse_site(name);
  if (!s) {
    std::string good;
    for (Site x : kAllSites) good += std::string(good.empty() ? "" : ", ") + site_name(x);
    LG_INPUT_CHECK(false, "unknown sync site '{}' (known: {})", name, good);
  }
  return *s;
}

// ---- the ledger ----

void Ledger::note(Site site, int64_t numel, ReadRecord::Kind kind) {
  set_current_site(site_name(site));
  if (wait_observer_) wait_observer_();
  if (!counting_) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[iteration_][site];
  records_.push_back({iteration_, site, numel, kind});
}

std::vector<double> Ledger::read(Site site, const at::Tensor& t) {
  note(site, t.numel(), ReadRecord::Kind::kRead);
  OpCounter::Suspend host_side;  // a copy and a host conversion: no kernel launch on the device
  // One device-to-host copy, converted on the host (a dtype change on the device would be a second kernel).
  at::Tensor host = t.detach().to(at::kCPU).to(at::kDouble).contiguous();
  const double* p = host.data_ptr<double>();
  return std::vector<double>(p, p + host.numel());
}

at::Tensor Ledger::device_scalar(Site site, double value, const at::TensorOptions& options) {
  return device_tensor(site, {value}, options);
}

at::Tensor Ledger::device_tensor(Site site, const std::vector<double>& values, const at::TensorOptions& options) {
  note(site, static_cast<int64_t>(values.size()), ReadRecord::Kind::kDeviceScalar);
  OpCounter::Suspend host_side;  // built on the host, then one copy: no kernel launch on the device
  // A pageable host tensor copied to the target: on GPU this is the blocking copy the seed's commit 3 removed.
  at::Tensor host = at::tensor(values, at::TensorOptions().dtype(at::kDouble));
  const at::ScalarType dtype = options.has_dtype() ? options.dtype().toScalarType() : at::kFloat;
  return host.to(options.device(), dtype);
}

void Ledger::record_sync(Site site) { note(site, 0, ReadRecord::Kind::kSync); }

void Ledger::record_read(Site site, int64_t numel) { note(site, numel, ReadRecord::Kind::kRead); }

void Ledger::record_async_race() {
  std::lock_guard<std::mutex> lock(mu_);
  ++async_races_;
}

void Ledger::set_wait_observer(std::function<void()> observer) { wait_observer_ = std::move(observer); }

int64_t Ledger::async_races() const {
  std::lock_guard<std::mutex> lock(mu_);
  return async_races_;
}

void Ledger::begin_iteration(int64_t iteration) {
  std::lock_guard<std::mutex> lock(mu_);
  iteration_ = iteration;
  set_current_iteration(iteration);
}

Ledger::CountAs::CountAs(Ledger& ledger, int64_t iteration) : ledger_(ledger), was_(ledger.iteration()) {
  std::lock_guard<std::mutex> lock(ledger_.mu_);
  ledger_.iteration_ = iteration;
  set_current_iteration_quietly(iteration);
}

Ledger::CountAs::~CountAs() {
  std::lock_guard<std::mutex> lock(ledger_.mu_);
  ledger_.iteration_ = was_;
  set_current_iteration_quietly(was_);
}

void Ledger::set_counting(bool on) { counting_ = on; }
bool Ledger::counting() const { return counting_; }

int64_t Ledger::iteration() const {
  std::lock_guard<std::mutex> lock(mu_);
  return iteration_;
}

const std::map<Site, int64_t>& Ledger::counts(int64_t iteration) const {
  static const std::map<Site, int64_t> kEmpty;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counts_.find(iteration);
  return it == counts_.end() ? kEmpty : it->second;
}

int64_t Ledger::count(int64_t iteration, Site site) const {
  const auto& c = counts(iteration);
  auto it = c.find(site);
  return it == c.end() ? 0 : it->second;
}

std::map<std::string, int64_t> Ledger::counts_by_name(int64_t iteration) const {
  std::map<std::string, int64_t> out;
  for (const auto& [site, n] : counts(iteration)) out[site_name(site)] = n;
  return out;
}

std::map<Site, int64_t> Ledger::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<Site, int64_t> out;
  for (const auto& [it, per_site] : counts_)
    for (const auto& [site, n] : per_site) out[site] += n;
  return out;
}

int64_t Ledger::total(Site site) const {
  auto t = totals();
  auto it = t.find(site);
  return it == t.end() ? 0 : it->second;
}

int64_t Ledger::total() const {
  int64_t n = 0;
  for (const auto& [site, c] : totals()) n += c;
  return n;
}

const std::vector<ReadRecord>& Ledger::records() const { return records_; }

int64_t Ledger::diagnostic_reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return diagnostic_reads_;
}

uint64_t Ledger::checksum(const std::vector<at::Tensor>& tensors) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++diagnostic_reads_;
  }
  // Its device reads are real syncs: name them apart for CUPTI, then give the site back, so a sync nobody
  // names after this still lands on a loop site (where ledger == CUPTI catches it), not on the diagnostics.
  const char* previous = current_site();
  set_current_site("diagnostic_checksum");
  const uint64_t h = tensor_checksum(tensors);
  set_current_site(previous);
  return h;
}

std::vector<at::Tensor> Ledger::host_copies(const std::vector<at::Tensor>& tensors) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++diagnostic_reads_;
  }
  const char* previous = current_site();
  set_current_site("diagnostic_checkpoint");
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors) out.push_back(t.detach().to(at::kCPU).contiguous().clone());
  set_current_site(previous);
  return out;
}

void Ledger::checkpoint_sync(const std::function<void()>& sync) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++diagnostic_reads_;
  }
  const char* previous = current_site();
  set_current_site("diagnostic_checkpoint");
  if (sync) sync();
  set_current_site(previous);
}

void Ledger::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  iteration_ = 0;
  counts_.clear();
  records_.clear();
  diagnostic_reads_ = 0;
}

uint64_t tensor_checksum(const std::vector<at::Tensor>& tensors) {
  uint64_t h = 1469598103934665603ull;
  // FNV-1a over 8-byte words (then the tail bytes): every byte still counts, at an eighth of the steps — the
  // checksums run twice per iteration on every rank, which at 64 ranks on 2 cores is time.
  auto mix = [&h](const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, b + i, 8);
      h ^= w;
      h *= 1099511628211ull;
    }
    for (; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  };
  // Device tensors: one device-to-host copy per dtype rather than one per tensor (on a GPU every copy is a sync).
  // CPU tensors are hashed where they lie, the same bytes: a concatenated copy would be a fresh allocation, and its
  // page faults, twice per iteration on every rank (64 ranks on 2 cores).
  std::map<at::ScalarType, std::vector<at::Tensor>> flat;
  for (const at::Tensor& t : tensors)
    if (!t.device().is_cpu()) flat[t.scalar_type()].push_back(t.detach().reshape({-1}));
  std::map<at::ScalarType, at::Tensor> host;
  std::map<at::ScalarType, int64_t> offset;
  for (auto& [dtype, parts] : flat) host[dtype] = at::cat(parts).to(at::kCPU).contiguous();
  for (const at::Tensor& t : tensors) {
    at::Tensor bytes;
    if (t.device().is_cpu()) {
      bytes = t.detach().contiguous();
    } else {
      bytes = host[t.scalar_type()].narrow(0, offset[t.scalar_type()], t.numel());
      offset[t.scalar_type()] += t.numel();
    }
    int64_t dtype = static_cast<int64_t>(t.scalar_type());
    mix(&dtype, sizeof dtype);
    for (int64_t d : t.sizes()) mix(&d, sizeof d);
    mix(bytes.data_ptr(), bytes.numel() * bytes.element_size());
  }
  return h;
}

}  // namespace loopgate
