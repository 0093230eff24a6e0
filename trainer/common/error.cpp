#include "trainer/common/error.h"

#include <atomic>

namespace loopgate {

int& world_rank_for_errors() {
  static int rank = -1;
  return rank;
}

namespace {
std::atomic<const char*> g_site{"startup"};
std::atomic<long long> g_iteration{0};
}

const char* current_site() { return g_site.load(std::memory_order_relaxed); }
void set_current_site(const char* site) { g_site.store(site, std::memory_order_relaxed); }
long long current_iteration() { return g_iteration.load(std::memory_order_relaxed); }
void set_current_iteration(long long iteration) { g_iteration.store(iteration, std::memory_order_relaxed); }

void throw_error(const char* file, int line, const std::string& what) {
  throw Error(fmt::format("[rank {}] {}:{} (site {}): {}", world_rank_for_errors(), file, line, current_site(), what));
}

}  // namespace loopgate
