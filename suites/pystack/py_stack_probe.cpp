// A stand-in for the injection library in the CPU tests of the frame walker and the Python shim (no CUDA here):
// loopgate_probe_site() names the calling thread's Python site as a driver callback would, and
// loopgate_sync_iteration() counts marks as the injection library does.
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "tools/cupti/py_stack.h"

namespace {
std::atomic<long> g_marks{0};
}

// Writes "file:line function" of the innermost frame outside `skip` (comma-separated) into buf, or what differs
// between the two ways of naming it; returns the number of frames read (0: no Python on this thread, or none
// readable).
extern "C" int loopgate_probe_site(char* buf, int n, const char* skip) {
  std::vector<std::string> skips;
  for (const char* p = skip; p && *p;) {
    const char* comma = std::strchr(p, ',');
    skips.emplace_back(p, comma ? static_cast<size_t>(comma - p) : std::strlen(p));
    p = comma ? comma + 1 : p + std::strlen(p);
  }
  const std::vector<loopgate::pystack::Frame> frames = loopgate::pystack::current_frames();
  const loopgate::pystack::Frame* f = loopgate::pystack::innermost_outside(frames, skips);
  std::string text = f ? loopgate::pystack::site_text(*f) : loopgate::pystack::unavailable_reason();
  // The counter names a site with innermost_site (one frame decoded, the rest cached): it must agree with the
  // full walk, also on a call it has seen before.
  std::string fast;
  const bool found = loopgate::pystack::innermost_site(skips, &fast);
  if (found != (f != nullptr) || (found && fast != text)) text = "innermost_site disagrees: '" + fast + "' vs '" + text + "'";
  std::strncpy(buf, text.c_str(), static_cast<size_t>(n - 1));
  buf[n - 1] = '\0';
  return static_cast<int>(frames.size());
}

extern "C" void loopgate_sync_iteration(void) { g_marks.fetch_add(1); }
extern "C" long loopgate_probe_marks(void) { return g_marks.load(); }
