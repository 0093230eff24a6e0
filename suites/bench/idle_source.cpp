// The idle_pct hook (idle_source.h).
#include "suites/bench/idle_source.h"

namespace loopgate::bench {
namespace {
std::unique_ptr<IdleSource>& slot() {
  static std::unique_ptr<IdleSource> source;
  return source;
}
}  // namespace

void install_idle_source(std::unique_ptr<IdleSource> source) { slot() = std::move(source); }
IdleSource* idle_source() { return slot().get(); }

}  // namespace loopgate::bench
