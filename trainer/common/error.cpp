#include "trainer/common/error.h"

#include <atomic>
#include <map>
#include <mutex>

namespace loopgate {

int& world_rank_for_errors() {
  static int rank = -1;
  return rank;
}

namespace {
std::atomic<const char*> g_site{"startup"};
std::atomic<const char*> g_scope{""};
std::atomic<long long> g_iteration{0};
std::atomic<IterationObserver> g_iteration_observer{nullptr};
std::atomic<unsigned long long> g_progress{0};
std::mutex g_mu;  // the scenario name and the abort hooks
std::string g_scenario;
std::map<int, std::function<void()>> g_abort_hooks;
int g_next_hook = 0;
}  // namespace

const char* current_site() { return g_site.load(std::memory_order_relaxed); }
void set_current_site(const char* site) {
  g_site.store(site, std::memory_order_relaxed);
  note_progress();
}
const char* current_scope() { return g_scope.load(std::memory_order_relaxed); }
void ScopedSite::set_scope(const char* scope) { g_scope.store(scope, std::memory_order_relaxed); }
long long current_iteration() { return g_iteration.load(std::memory_order_relaxed); }
void set_current_iteration(long long iteration) {
  g_iteration.store(iteration, std::memory_order_relaxed);
  note_progress();
  if (IterationObserver observer = g_iteration_observer.load(std::memory_order_acquire)) observer(iteration);
}
void set_current_iteration_quietly(long long iteration) {
  g_iteration.store(iteration, std::memory_order_relaxed);
  note_progress();
}
void set_iteration_observer(IterationObserver observer) {
  g_iteration_observer.store(observer, std::memory_order_release);
}

void note_progress() { g_progress.fetch_add(1, std::memory_order_relaxed); }
unsigned long long progress_count() { return g_progress.load(std::memory_order_relaxed); }

namespace {
std::function<void(const std::string&)> g_scenario_observer;  // set once at start-up, before any scenario
}  // namespace

void set_current_scenario(const std::string& scenario) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_scenario = scenario;
  }
  note_progress();
  if (g_scenario_observer) g_scenario_observer(scenario);
}

void set_scenario_observer(std::function<void(const std::string&)> observer) {
  g_scenario_observer = std::move(observer);
}

std::string current_scenario() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_scenario;
}

int add_abort_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_abort_hooks[g_next_hook] = std::move(hook);
  return g_next_hook++;
}

void remove_abort_hook(int id) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_abort_hooks.erase(id);
}

void run_abort_hooks() {
  std::map<int, std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    hooks = g_abort_hooks;
  }
  for (auto& [id, hook] : hooks) hook();
}

void throw_error(const char* file, int line, const std::string& what) {
  throw Error(fmt::format("[rank {}] {}:{} (site {}): {}", world_rank_for_errors(), file, line, current_site(), what));
}

}  // namespace loopgate
