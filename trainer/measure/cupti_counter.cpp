// CuptiSyncCounter: the in-process form. Attribution is the ledger's: (current_iteration(), current_site()),
// read on the thread that made the driver call (the autograd thread too: the site names are global). Profile
// mode adds the blocking calls' CUPTI-clock times and the iteration windows to the activity recorder's intervals.
#include "trainer/measure/cupti_counter.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "trainer/common/error.h"
#include "trainer/measure/cupti_core.h"
#include "trainer/measure/cupti_profile.h"

namespace loopgate {

struct CuptiSyncCounter::Impl : cupti::Hooks {
  cupti::Engine engine;
  std::string why = "not started";
  std::atomic<int64_t> pinned_iteration{-1};

  bool attribute(cupti::CallKind, double, int64_t* iteration, std::string* site) override {
    const int64_t pinned = pinned_iteration.load(std::memory_order_relaxed);
    *iteration = pinned >= 0 ? pinned : static_cast<int64_t>(current_iteration());
    *site = current_site();
    return true;
  }

  // ---- profile mode ----
  std::atomic<bool> profiling{false};
  std::mutex profile_mu;
  std::vector<HostSyncCall> syncs;
  std::vector<std::pair<uint32_t, int64_t>> issues;  // (correlation id, CUPTI-clock exit) of calls issuing work
  std::vector<IterationWindow> windows;   // ended
  IterationWindow open_window{-1, 0, 0};  // iteration < 0: none open

  // The call's exit is now on CUPTI's clock; its enter is that minus its steady-clock length (the engine's own
  // timing; the two clocks tick alike over a call, and the engine keeps its enter slot for the steady clock).
  void on_blocking_call(cupti::CallKind, uint64_t call_ns) override {
    if (!profiling.load(std::memory_order_relaxed)) return;
    const int64_t exit = cupti::timestamp_ns();
    std::lock_guard<std::mutex> lock(profile_mu);
    syncs.push_back({exit - static_cast<int64_t>(call_ns), exit});
  }

  void on_issue(uint32_t correlation_id) override {
    if (!profiling.load(std::memory_order_relaxed)) return;
    const int64_t exit = cupti::timestamp_ns();
    std::lock_guard<std::mutex> lock(profile_mu);
    issues.emplace_back(correlation_id, exit);
  }

  // An iteration begins (iteration < 0: none does): the open window ends here.
  void mark(int64_t iteration) {
    if (!profiling.load(std::memory_order_relaxed)) return;
    const int64_t now = cupti::timestamp_ns();
    std::lock_guard<std::mutex> lock(profile_mu);
    if (iteration >= 0 && iteration == open_window.iteration) return;  // replay_step, then train_step: one window
    close_window(now);
    if (iteration >= 0) open_window = {iteration, now, 0};
  }

  void close_window(int64_t now) {  // under profile_mu
    if (open_window.iteration < 0) return;
    open_window.end_ns = now;
    windows.push_back(open_window);
    open_window = {-1, 0, 0};
  }
};

CuptiSyncCounter::CuptiSyncCounter() : impl_(std::make_unique<Impl>()) {
  impl_->engine.set_slow_call_us(cupti::slow_call_us_from_env());
}
CuptiSyncCounter::~CuptiSyncCounter() = default;

CuptiSyncCounter& CuptiSyncCounter::instance() {
  static CuptiSyncCounter* counter = new CuptiSyncCounter();  // never destroyed: callbacks may outlive main
  return *counter;
}

bool CuptiSyncCounter::compiled_in() { return true; }

bool CuptiSyncCounter::start() {
  std::string why;
  if (impl_->engine.start("loopgate-sync-counter", impl_.get(), /*want_nvtx=*/false, &why)) {
    impl_->why.clear();
    return true;
  }
  impl_->why = why;
  return false;
}

void CuptiSyncCounter::stop() { impl_->engine.stop(); }
bool CuptiSyncCounter::active() const { return impl_->engine.active(); }
const std::string& CuptiSyncCounter::why() const { return impl_->why; }
void CuptiSyncCounter::set_iteration(int64_t iteration) { impl_->pinned_iteration.store(iteration); }
void CuptiSyncCounter::set_paused(bool paused) { impl_->engine.set_paused(paused); }
void CuptiSyncCounter::set_slow_call_us(double us) { impl_->engine.set_slow_call_us(us); }
SyncTable CuptiSyncCounter::table() const { return impl_->engine.table(); }
std::vector<DriverCallTally> CuptiSyncCounter::driver_calls() const { return impl_->engine.driver_calls(); }

void CuptiSyncCounter::reset() {
  impl_->engine.reset();
  cupti::ActivityRecorder::instance().reset();
  std::lock_guard<std::mutex> lock(impl_->profile_mu);
  impl_->syncs.clear();
  impl_->issues.clear();
  impl_->windows.clear();
  impl_->open_window = {-1, 0, 0};
}

// ---- profile mode ----

bool CuptiSyncCounter::start_profile() {
  if (impl_->profiling.load()) return true;
  if (!active()) {
    impl_->why = "profile: the sync counter is not running (start() first)";
    return false;
  }
  std::string why;
  if (!cupti::ActivityRecorder::instance().start(&why)) {
    impl_->why = "profile: " + why;
    return false;
  }
  // Runtime calls too: a kernel's activity record may carry its runtime launch's correlation id (the join).
  if (!impl_->engine.set_runtime_calls(true, &why)) {
    cupti::ActivityRecorder::instance().stop();
    impl_->why = "profile: " + why;
    return false;
  }
  impl_->profiling.store(true);
  // A lambda in a member function may reach impl_; captureless, so it is the plain function pointer error.h keeps.
  set_iteration_observer([](long long iteration) { instance().impl_->mark(iteration); });
  return true;
}

void CuptiSyncCounter::end_profile_window() { impl_->mark(-1); }

void CuptiSyncCounter::stop_profile() {
  if (!impl_->profiling.load()) return;
  impl_->mark(-1);
  impl_->profiling.store(false);
  set_iteration_observer(nullptr);
  impl_->engine.set_runtime_calls(false, nullptr);
  cupti::ActivityRecorder::instance().stop();
}

bool CuptiSyncCounter::profiling() const { return impl_->profiling.load(); }

DeviceProfile CuptiSyncCounter::profile() {
  cupti::ActivityRecorder& recorder = cupti::ActivityRecorder::instance();
  recorder.flush();
  DeviceProfile p;
  p.intervals = recorder.intervals();
  p.dropped_records = recorder.dropped();
  std::lock_guard<std::mutex> lock(impl_->profile_mu);
  p.syncs = impl_->syncs;
  p.windows = impl_->windows;
  std::unordered_map<uint32_t, int64_t> issued(impl_->issues.begin(), impl_->issues.end());
  for (DeviceInterval& i : p.intervals) {
    auto it = i.correlation ? issued.find(i.correlation) : issued.end();
    if (it == issued.end()) continue;
    i.launched_ns = it->second;
    ++p.launch_times;
  }
  return p;
}

SyncTally CuptiSyncCounter::at(int64_t iteration, const std::string& site) const {
  SyncTable t = table();
  auto it = t.find(iteration);
  if (it == t.end()) return {};
  auto s = it->second.find(site);
  return s == it->second.end() ? SyncTally{} : s->second;
}

}  // namespace loopgate
