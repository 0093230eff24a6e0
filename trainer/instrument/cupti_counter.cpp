// CuptiSyncCounter: the in-process form. Attribution is the ledger's: (current_iteration(), current_site()),
// read on the thread that made the driver call (the autograd thread too: the site names are global).
#include "trainer/instrument/cupti_counter.h"

#include <atomic>

#include "trainer/common/error.h"
#include "trainer/instrument/cupti_core.h"

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
void CuptiSyncCounter::reset() { impl_->engine.reset(); }

SyncTally CuptiSyncCounter::at(int64_t iteration, const std::string& site) const {
  SyncTable t = table();
  auto it = t.find(iteration);
  if (it == t.end()) return {};
  auto s = it->second.find(site);
  return s == it->second.end() ? SyncTally{} : s->second;
}

}  // namespace loopgate
