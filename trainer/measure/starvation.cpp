// Launch starvation (starvation.h): the device timeline merged into busy spans, its idle gaps labelled
// sync-starved or other on the WHOLE timeline (a gap that starts in one iteration and ends in the next is one
// gap), then everything clipped to each iteration's window.
#include "trainer/measure/starvation.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace loopgate {
namespace {

constexpr int64_t kMinusInf = std::numeric_limits<int64_t>::min();
constexpr int64_t kPlusInf = std::numeric_limits<int64_t>::max();

struct Span {
  int64_t begin, end;  // [begin, end)
};

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// ---- the timeline ----

// Where the device, done with everything so far, moved to its next work: an idle gap [begin, end) (begin == end
// when the work overlapped or touched what ran before). `waited`: the host launched that work only at or after
// `begin`, so the device waited for the launch; false when the work was already issued (or its launch time is
// unknown). The timeline opens with an unbounded gap before the first work and closes with one after the last.
struct IdleGap {
  int64_t begin, end;
  bool waited;
};

struct Timeline {
  std::vector<Span> busy;            // the union of the intervals: sorted, disjoint (touching intervals merge)
  std::vector<IdleGap> boundaries;  // in time order
};

Timeline timeline_of(std::vector<DeviceInterval> work) {
  work.erase(std::remove_if(work.begin(), work.end(), [](const DeviceInterval& i) { return i.end_ns <= i.start_ns; }),
             work.end());
  std::sort(work.begin(), work.end(), [](const DeviceInterval& a, const DeviceInterval& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.launched_ns < b.launched_ns;
  });
  Timeline t;
  int64_t free_at = kMinusInf;  // when the device finished everything before the current interval
  for (const DeviceInterval& x : work) {
    const bool waited = x.launched_ns > 0 && x.launched_ns >= free_at;
    if (x.start_ns > free_at) {  // an idle gap, then a new busy span
      t.boundaries.push_back({free_at, x.start_ns, waited});
      t.busy.push_back({x.start_ns, x.end_ns});
    } else {  // overlaps or touches the span so far
      t.boundaries.push_back({x.start_ns, x.start_ns, waited});
      t.busy.back().end = std::max(t.busy.back().end, x.end_ns);
    }
    free_at = t.busy.back().end;
  }
  t.boundaries.push_back({free_at, kPlusInf, false});
  return t;
}

struct Starved {
  std::vector<Span> launch, sync;  // each sorted and disjoint; sync within launch
};

// Launch-starved: every gap whose work the device waited for, and the sync-starved part of any other gap.
// Sync-starved: a gap holding a host sync's exit is sync-starved from max(its begin, the enter of the
// earliest-starting such sync) to its end: the host was blocked until the device drained. That opens a drain:
// the queue is empty, so every later gap whose work the device waited for is sync-starved too, until the first
// boundary where the work was already issued (the host leads again) or a gap the device did not wait for (its
// work was issued, yet it started late: latency or a dependency, not the host).
Starved starved_spans(const std::vector<IdleGap>& boundaries, std::vector<HostSyncCall> syncs) {
  std::sort(syncs.begin(), syncs.end(),
            [](const HostSyncCall& a, const HostSyncCall& b) { return a.exit_ns < b.exit_ns; });
  Starved starved;
  bool draining = false;
  auto next = syncs.begin();
  for (const IdleGap& b : boundaries) {
    while (next != syncs.end() && next->exit_ns < b.begin) ++next;  // exited while the device was busy
    int64_t from = kPlusInf;
    for (; next != syncs.end() && next->exit_ns < b.end; ++next)
      from = std::min(from, std::max(b.begin, next->enter_ns));
    if (b.end > b.begin && (b.waited || from < b.end)) starved.launch.push_back({b.waited ? b.begin : from, b.end});
    if (from < b.end) {
      starved.sync.push_back({from, b.end});
      draining = true;
    } else if (draining && b.waited) {
      if (b.end > b.begin) starved.sync.push_back({b.begin, b.end});
    } else {
      draining = false;
    }
  }
  return starved;
}

// Nanoseconds of the sorted, disjoint `spans` inside [begin, end).
int64_t overlap(const std::vector<Span>& spans, int64_t begin, int64_t end) {
  auto it = std::upper_bound(spans.begin(), spans.end(), begin, [](int64_t t, const Span& s) { return t < s.end; });
  int64_t total = 0;
  for (; it != spans.end() && it->begin < end; ++it) total += std::min(end, it->end) - std::max(begin, it->begin);
  return total;
}

// How many of the sorted times lie in [begin, end).
int64_t starts_in(const std::vector<int64_t>& sorted, int64_t begin, int64_t end) {
  if (end <= begin) return 0;
  return std::lower_bound(sorted.begin(), sorted.end(), end) - std::lower_bound(sorted.begin(), sorted.end(), begin);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

// ---- the analysis ----

std::vector<StarvationRow> analyze_starvation(const std::vector<DeviceInterval>& intervals,
                                              const std::vector<HostSyncCall>& syncs,
                                              const std::vector<IterationWindow>& windows) {
  const Timeline timeline = timeline_of(intervals);
  const std::vector<Span>& busy = timeline.busy;
  const Starved starved = starved_spans(timeline.boundaries, syncs);
  std::vector<int64_t> kernel_starts, copy_starts, sync_exits;
  for (const DeviceInterval& i : intervals)
    (i.kind == DeviceWorkKind::kKernel ? kernel_starts : copy_starts).push_back(i.start_ns);
  for (const HostSyncCall& s : syncs) sync_exits.push_back(s.exit_ns);
  for (auto* v : {&kernel_starts, &copy_starts, &sync_exits}) std::sort(v->begin(), v->end());
  std::vector<StarvationRow> rows;
  for (const IterationWindow& w : windows) {
    StarvationRow r;
    r.iteration = w.iteration;
    const int64_t length = std::max<int64_t>(0, w.end_ns - w.begin_ns);
    const int64_t busy_ns = overlap(busy, w.begin_ns, w.end_ns);
    const int64_t starved_ns = overlap(starved.sync, w.begin_ns, w.end_ns);
    r.window_ms = ms(length);
    r.busy_ms = ms(busy_ns);
    r.idle_ms = ms(length - busy_ns);
    r.launch_starved_ms = ms(overlap(starved.launch, w.begin_ns, w.end_ns));
    r.sync_starved_ms = ms(starved_ns);
    r.other_idle_ms = ms(length - busy_ns - starved_ns);
    r.kernels = starts_in(kernel_starts, w.begin_ns, w.end_ns);
    r.copies = starts_in(copy_starts, w.begin_ns, w.end_ns);
    r.syncs = starts_in(sync_exits, w.begin_ns, w.end_ns);
    rows.push_back(r);
  }
  return rows;
}

std::vector<StarvationRow> steady_rows(const std::vector<StarvationRow>& rows, size_t skip_first, size_t skip_last) {
  if (rows.size() <= skip_first + skip_last) return rows;
  return {rows.begin() + static_cast<std::ptrdiff_t>(skip_first), rows.end() - static_cast<std::ptrdiff_t>(skip_last)};
}

StarvationSummary summarize_starvation(const std::vector<StarvationRow>& rows) {
  StarvationSummary s;
  s.iterations = rows.size();
  s.median.iteration = s.mean.iteration = static_cast<int64_t>(rows.size());
  if (rows.empty()) return s;
  auto both = [&](double StarvationRow::*f) {
    std::vector<double> v;
    double sum = 0;
    for (const StarvationRow& r : rows) {
      v.push_back(r.*f);
      sum += r.*f;
    }
    s.median.*f = median_of(v);
    s.mean.*f = sum / static_cast<double>(rows.size());
  };
  for (double StarvationRow::*f : kStarvationTimes) both(f);
  auto counts = [&](int64_t StarvationRow::*f) {
    std::vector<double> v;
    int64_t sum = 0;
    for (const StarvationRow& r : rows) {
      v.push_back(static_cast<double>(r.*f));
      sum += r.*f;
    }
    s.median.*f = static_cast<int64_t>(median_of(v));
    s.mean.*f = sum / static_cast<int64_t>(rows.size());
  };
  for (int64_t StarvationRow::*f : {&StarvationRow::kernels, &StarvationRow::copies, &StarvationRow::syncs}) counts(f);
  return s;
}

// ---- text ----

namespace {
std::string header() {
  return fmt::format("{:>9} {:>10} {:>10} {:>10} {:>14} {:>13} {:>11} {:>8} {:>7} {:>6}\n", "iteration",
                     "window-ms", "busy-ms", "idle-ms", "launch-starved", "sync-starved", "other-idle", "kernels",
                     "copies", "syncs");
}
std::string line(const std::string& first, const StarvationRow& r) {
  return fmt::format("{:>9} {:>10.3f} {:>10.3f} {:>10.3f} {:>14.3f} {:>13.3f} {:>11.3f} {:>8} {:>7} {:>6}\n", first,
                     r.window_ms, r.busy_ms, r.idle_ms, r.launch_starved_ms, r.sync_starved_ms, r.other_idle_ms,
                     r.kernels, r.copies, r.syncs);
}
}  // namespace

std::string format_starvation_table(const std::vector<StarvationRow>& rows, const std::string& title, size_t max_rows) {
  std::string out = title + "\n" + header();
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) out += line(std::to_string(rows[i].iteration), rows[i]);
  if (rows.size() > max_rows) out += fmt::format("{:>9} ({} more)\n", "...", rows.size() - max_rows);
  return out;
}

std::string format_starvation_summary(const StarvationSummary& s, const std::string& label) {
  std::string out = fmt::format("{} over {} iteration(s), ms per iteration:\n", label, s.iterations) + header();
  out += line("median", s.median);
  out += line("mean", s.mean);
  return out;
}

}  // namespace loopgate
