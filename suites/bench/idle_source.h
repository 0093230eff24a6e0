// idle_pct: the share of a window the device sat idle (launch starvation), when a profile source can tell — a
// CUPTI activity trace of kernel spans, say. None is built into loopgate_bench: while no source is installed the
// counter is left out of the results, never reported as 0 (a 0 would read as "the device never waited").
// A source is installed before the benchmarks run and is asked about the counted window only (the one that
// also counts launches), so its own cost never lands in a timed window.
#pragma once
#include <memory>
#include <optional>
#include <string>

namespace loopgate::bench {

class IdleSource {
 public:
  virtual ~IdleSource() = default;
  virtual std::string name() const = 0;  // e.g. "cupti-activity"
  virtual void begin_window() = 0;       // the counted window starts on this rank
  // Percent of the window [0, 100] this rank's device ran no kernel, or none when the source could not tell.
  virtual std::optional<double> end_window() = 0;
};

void install_idle_source(std::unique_ptr<IdleSource> source);  // replaces any; nullptr removes it
IdleSource* idle_source();                                      // nullptr when none is installed

}  // namespace loopgate::bench
