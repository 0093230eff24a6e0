// libloopgate_sync_inject.so: the CUPTI sync counter loaded into ANY CUDA process, with no relinking:
//   CUDA_INJECTION64_PATH=/path/libloopgate_sync_inject.so python3 train.py      (or: loopgate syncs -- CMD...)
// The driver calls InitializeInjection() at cuInit; at exit the library prints host syncs per iteration per
// call site (stderr, or the file LOOPGATE_CUPTI_OUT; LOOPGATE_CUPTI_CSV adds one CSV row per (iteration, site);
// LOOPGATE_CUPTI_JSON the sites with their kinds and Python stacks). In each file name, %p stands for the pid: a
// job's processes write one file each. A process that counted nothing writes no file (one stderr line).
//   region of interest  LOOPGATE_CUPTI_ROI: unset = the whole process; "profiler" = between cuProfilerStart and
//                       cuProfilerStop (cudaProfilerStart/Stop); "iters:A-B" = marked iterations A to B; anything
//                       else = inside NVTX ranges of that name.
//   iterations          each call of loopgate_sync_iteration() (the Python shim calls it on entry to a named
//                       function, Megatron's train_step by default), or each NVTX range push / start / mark whose
//                       name starts with LOOPGATE_CUPTI_ITER (default "iteration"), begins the next iteration;
//                       calls before the first are iteration 0.
//   call site           for calls that count (syncs, pageable copies, stalls): the innermost Python frame of the
//                       calling thread outside PyTorch's own Python (py_stack.h; LOOPGATE_PY_SKIP adds
//                       comma-separated path substrings to skip), "file:line function"; else the innermost named
//                       NVTX range open on the thread; else the first native frame outside libcuda / libcudart /
//                       CUPTI / this library (dladdr, demangled; LOOPGATE_CUPTI_SKIP adds library substrings).
//                       Each site carries what the sync was (its kind): .item() (a device-to-host copy of at most
//                       8 bytes, then the stream's synchronize), a larger D2H copy + sync, a pageable copy, a
//                       stream / event / device synchronize, a synchronous copy, or a stall (another call that
//                       blocked >= LOOPGATE_CUPTI_SLOW_US, default 500).
//   subscription        only the driver calls that can block (copies, synchronizes, allocation, profiler start and
//                       stop); LOOPGATE_CUPTI_LAUNCHES=1 adds kernel and graph launches, LOOPGATE_CUPTI_ALL_CALLS=1
//                       every driver call (the cost of a callback on each, cuCtxGetDevice above all).
//   overhead A/B        LOOPGATE_CUPTI_AB=1: marked iterations of the region alternate counted and uncounted (the
//                       driver callbacks off); each one's duration goes to its arm, in the JSON's "overhead_ab"
//                       (alternating_iterations.h). The table then holds the counted iterations only.
// NVTX callbacks need NVTX_INJECTION64_PATH pointing at libcupti.so; InitializeInjection sets it when unset,
// which covers programs whose first NVTX call comes after CUDA starts. LOOPGATE_CUPTI_NVTX=0 leaves NVTX off
// (`loopgate syncs` does, unless --nvtx: its iterations and sites come from Python).
// One CUPTI subscriber per process: with this library loaded, the PyTorch profiler cannot subscribe.
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>
#include <generated_nvtx_meta.h>
#include <nvtx3/nvToolsExt.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/cupti/py_stack.h"
#include "tools/cupti/alternating_iterations.h"
#include "tools/cupti/sync_kind.h"
#include "trainer/measure/cupti_core.h"
#include "trainer/measure/sync_table_file.h"

namespace {

// Marked iterations (loopgate_sync_iteration), counted before and after the injection starts.
std::atomic<int64_t> g_marked_iterations{0};

using loopgate::cupti::CallKind;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::vector<std::string> split_csv(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = 0; !text.empty() && pos != std::string::npos;) {
    const size_t next = text.find(',', pos);
    std::string item = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    if (!item.empty()) out.push_back(item);
    pos = next == std::string::npos ? next : next + 1;
  }
  return out;
}

// "%p" -> the pid, so each process of a job writes its own file.
std::string per_process(std::string path) {
  for (size_t at = path.find("%p"); at != std::string::npos; at = path.find("%p", at))
    path.replace(at, 2, std::to_string(getpid()));
  return path;
}

// The copy a thread issued last (sync_kind.h: a synchronize right after a device-to-host copy on the same stream is
// that copy's wait; torch's .item() and .cpu() are an async copy, then cudaStreamSynchronize).
thread_local loopgate::cupti::IssuedCopy t_last_copy;
thread_local std::string t_kind;  // what the call being attributed was
// loopgate_sync_uncharged(1) on a thread: its calls count nowhere until (0). The Python shim's own reads (the exact
// values and digests of `loopgate pair`) run so, and no user site is charged for them.
thread_local bool t_uncharged = false;

loopgate::cupti::IssuedCopy copy_of(CUpti_CallbackId cbid, const void* params) {
  loopgate::cupti::IssuedCopy c;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz: {
      const auto* p = static_cast<const cuMemcpyDtoHAsync_v2_params*>(params);
      c = {true, p->ByteCount, p->hStream};
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz: {
      const auto* p = static_cast<const cuMemcpyAsync_params*>(params);
      unsigned int type = 0;  // the destination is host memory unless the driver knows it as device memory
      const bool dst_device = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p->dst) == CUDA_SUCCESS &&
                              type == CU_MEMORYTYPE_DEVICE;
      c = {!dst_device, p->ByteCount, p->hStream};
      break;
    }
    default: break;
  }
  return c;
}

// The driver call as sync_kind.h names blocking calls, and the stream a stream synchronize waits for.
loopgate::cupti::BlockingCall blocking_call(CUpti_CallbackId cbid, const void* params, CallKind kind,
                                            const void** stream) {
  using loopgate::cupti::BlockingCall;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
      *stream = static_cast<const cuStreamSynchronize_params*>(params)->hStream;
      return BlockingCall::kStreamSynchronize;
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize: return BlockingCall::kEventSynchronize;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2: return BlockingCall::kDeviceSynchronize;
    default: break;
  }
  if (kind == CallKind::kSyncMemcpy) return BlockingCall::kSyncMemcpy;
  if (kind == CallKind::kPageableAsync) return BlockingCall::kPageableAsync;
  return BlockingCall::kStall;
}

// One row of the JSON: a site and kind, with the Python stack of its first sync.
struct SiteInfo {
  std::string site, kind;
  std::vector<std::string> stack;
};

struct Injection : loopgate::cupti::Hooks {
  loopgate::cupti::Engine engine;
  std::string roi = env_or(loopgate::sync_file::kEnvRoi, "");
  std::string iter_prefix = env_or(loopgate::sync_file::kEnvIterPrefix, "iteration");
  std::vector<std::string> skip_libs;
  std::vector<std::string> skip_python = {"/torch/", "loopgate_pyshim"};
  int64_t roi_first = 0, roi_last = -1;  // ROI "iters:A-B"
  std::atomic<int> roi_depth{0};
  std::atomic<bool> profiler_on{false};
  std::atomic<int64_t> iteration{0};
  std::atomic<int64_t> iterations_seen{0};
  // The overhead A/B (LOOPGATE_CUPTI_AB=1): whether the current marked iteration is counted, and the durations.
  const bool alternate = env_or(loopgate::sync_file::kEnvOverheadAb, "") == "1";
  std::atomic<bool> alternate_counted{true};
  std::mutex ab_mu;
  loopgate::cupti::AlternatingIterations ab;
  std::mutex sym_mu;
  std::unordered_map<void*, std::string> sym_cache;

  std::mutex info_mu;
  std::unordered_map<std::string, SiteInfo> site_info;  // keyed as the table is: "site  [kind]"
  std::string python_note;

  bool iteration_roi() const { return roi_last >= roi_first && roi.rfind("iters:", 0) == 0; }
  bool in_roi() const { return in_region() && (!alternate || alternate_counted.load()); }
  bool in_region() const {
    if (roi.empty()) return true;
    if (roi == "profiler") return profiler_on.load();
    if (iteration_roi()) {
      const int64_t it = iteration.load();
      return it >= roi_first && it <= roi_last;
    }
    return roi_depth.load() > 0;
  }
  bool nvtx_roi() const { return !roi.empty() && roi != "profiler" && !iteration_roi(); }

  // A marked iteration: the counter follows the marker alone (NVTX markers are then ignored).
  void marked_iteration(int64_t n) {
    iteration.store(n);
    if (alternate) {
      const auto now_ms = [] {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
      };
      const bool region = in_region();
      bool counted = false;
      {
        std::lock_guard<std::mutex> lock(ab_mu);
        counted = ab.begin(n, region, now_ms());
      }
      alternate_counted.store(counted);
      engine.set_driver_calls(counted || !region);  // an uncounted iteration runs without callbacks
      std::lock_guard<std::mutex> lock(ab_mu);
      ab.restart(now_ms());
    }
    if (in_roi()) iterations_seen.fetch_add(1);
  }

  // ---- NVTX: region, iterations, site stack ----
  static thread_local std::vector<std::string> t_stack;

  void push(const char* name) {
    std::string n = name ? name : "";  // an unnamed range (NCCL's own) names no site
    if (nvtx_roi() && n == roi) roi_depth.fetch_add(1);
    if (!n.empty() && n.rfind(iter_prefix, 0) == 0) begin_iteration();
    t_stack.push_back(std::move(n));
  }
  void pop() {
    if (t_stack.empty()) return;
    if (nvtx_roi() && t_stack.back() == roi) roi_depth.fetch_sub(1);
    t_stack.pop_back();
  }
  void mark(const char* name) {
    if (name && std::string(name).rfind(iter_prefix, 0) == 0) begin_iteration();
  }
  void begin_iteration() {
    if (g_marked_iterations.load() > 0) return;  // the function marker counts iterations
    if (!in_roi()) return;  // iteration markers outside the region do not count
    iteration.store(iterations_seen.fetch_add(1) + 1);
  }
  static const char* ascii(const nvtxEventAttributes_t* a) {
    return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : nullptr;
  }

  void on_nvtx(CUpti_CallbackId cbid, const void* data) override {
    const auto* d = static_cast<const CUpti_NvtxData*>(data);
    const void* p = d->functionParams;
    switch (cbid) {
      case CUPTI_CBID_NVTX_nvtxRangePushA: push(static_cast<const nvtxRangePushA_params*>(p)->message); break;
      case CUPTI_CBID_NVTX_nvtxRangePushEx: push(ascii(static_cast<const nvtxRangePushEx_params*>(p)->eventAttrib)); break;
      case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
        push(ascii(static_cast<const nvtxDomainRangePushEx_params*>(p)->core.eventAttrib));
        break;
      case CUPTI_CBID_NVTX_nvtxRangePop:
      case CUPTI_CBID_NVTX_nvtxDomainRangePop: pop(); break;
      case CUPTI_CBID_NVTX_nvtxMarkA: mark(static_cast<const nvtxMarkA_params*>(p)->message); break;
      case CUPTI_CBID_NVTX_nvtxMarkEx: mark(ascii(static_cast<const nvtxMarkEx_params*>(p)->eventAttrib)); break;
      case CUPTI_CBID_NVTX_nvtxDomainMarkEx:
        mark(ascii(static_cast<const nvtxDomainMarkEx_params*>(p)->core.eventAttrib));
        break;
      case CUPTI_CBID_NVTX_nvtxRangeStartA: mark(static_cast<const nvtxRangeStartA_params*>(p)->message); break;
      case CUPTI_CBID_NVTX_nvtxRangeStartEx:
        mark(ascii(static_cast<const nvtxRangeStartEx_params*>(p)->eventAttrib));
        break;
      default: break;
    }
  }

  void on_profiler(bool start) override { profiler_on.store(start); }

  // ---- attribution ----

  std::string innermost_range() const {
    for (auto it = t_stack.rbegin(); it != t_stack.rend(); ++it) {
      if (it->empty() || (!roi.empty() && *it == roi)) continue;
      if (it->rfind(iter_prefix, 0) == 0) continue;
      return *it;
    }
    return "";
  }

  bool skipped_library(const char* path) const {
    if (path == nullptr) return true;
    static const char* kSkip[] = {"libcuda.so", "libcudart", "libcupti", "loopgate_sync_inject"};
    for (const char* s : kSkip)
      if (std::strstr(path, s)) return true;
    for (const std::string& s : skip_libs)
      if (std::strstr(path, s.c_str())) return true;
    return false;
  }

  std::string calling_frame() {
    void* frames[48];
    int n = backtrace(frames, 48);
    for (int i = 1; i < n; ++i) {
      Dl_info info{};
      if (dladdr(frames[i], &info) == 0 || skipped_library(info.dli_fname)) continue;
      std::lock_guard<std::mutex> lock(sym_mu);
      auto hit = sym_cache.find(frames[i]);
      if (hit != sym_cache.end()) return hit->second;
      std::string name;
      if (info.dli_sname) {
        int status = 0;
        char* dem = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
        name = status == 0 && dem ? dem : info.dli_sname;
        std::free(dem);
        if (name.size() > 90) name = name.substr(0, 87) + "...";
      } else {
        const char* base = info.dli_fname ? std::strrchr(info.dli_fname, '/') : nullptr;
        char buf[64];
        std::snprintf(buf, sizeof buf, "+0x%lx",
                      static_cast<unsigned long>(static_cast<char*>(frames[i]) - static_cast<char*>(info.dli_fbase)));
        name = std::string(base ? base + 1 : "?") + buf;
      }
      sym_cache.emplace(frames[i], name);
      return name;
    }
    return "(unknown frame)";
  }

  void on_driver_call(CUpti_CallbackId cbid, const void* params, CallKind kind) override {
    const char* name = nullptr;
    if (kind != CallKind::kSynchronize) cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name);
    const void* stream = nullptr;
    t_kind = loopgate::cupti::sync_kind(blocking_call(cbid, params, kind, &stream), stream, t_last_copy, name);
    t_last_copy = loopgate::cupti::copy_after(t_last_copy, copy_of(cbid, params), kind != CallKind::kOther);
  }

  bool attribute(CallKind kind, double ms, int64_t* it, std::string* site) override {
    if (!in_roi() || t_uncharged) return false;
    *it = iteration.load();
    const bool matters = kind != CallKind::kOther || ms >= engine.slow_call_ms();
    if (!matters) {
      *site = "(other driver calls)";
      return true;
    }
    const bool python = loopgate::pystack::innermost_site(skip_python, site);
    if (!python) {
      *site = innermost_range();
      if (site->empty()) *site = calling_frame();
    }
    const std::string key = *site + "  [" + t_kind + "]";
    {
      // The whole stack only for a site not seen before: the JSON keeps one stack per site.
      std::lock_guard<std::mutex> lock(info_mu);
      if (site_info.find(key) == site_info.end()) {
        std::vector<std::string> stack;
        if (python)
          for (const loopgate::pystack::Frame& f : loopgate::pystack::current_frames())
            stack.push_back(loopgate::pystack::site_text(f));
        site_info[key] = SiteInfo{*site, t_kind, std::move(stack)};
      }
    }
    *site = key;
    return true;
  }

  nlohmann::json json_report(const loopgate::SyncTable& table, const std::string& region) {
    std::map<std::string, loopgate::sync_file::SiteRow> rows;
    for (const auto& [iter, by_site] : table)
      for (const auto& [key, t] : by_site) {
        if (t.syncs() + t.pageable_async + t.stalls == 0) continue;
        loopgate::sync_file::SiteRow& r = rows[key];
        if (!r.counter_columns) {
          std::lock_guard<std::mutex> lock(info_mu);
          const SiteInfo& info = site_info[key];
          r.site = info.site;
          r.kind = info.kind;
          r.stack = info.stack;
          r.counter_columns = true;
        }
        r.per_iteration[iter] = t.syncs() + t.pageable_async + t.stalls;
        r.syncs += t.syncs();
        r.pageable += t.pageable_async;
        r.stalls += t.stalls;
        r.blocked_ms += t.sync_ms;
      }
    loopgate::sync_file::ProcessTable out;
    out.pid = static_cast<int>(getpid());
    out.region = region;
    out.iterations_seen = iterations_seen.load();
    for (const auto& [iter, by_site] : table) out.iterations.push_back(iter);
    out.python = python_note.empty() ? "read" : python_note;
    for (auto& [key, r] : rows) out.sites.push_back(std::move(r));
    out.overhead_ab = alternate ? ab_json() : nlohmann::json(nullptr);
    return loopgate::sync_file::to_json(out);
  }
  nlohmann::json ab_json() {
    std::lock_guard<std::mutex> lock(ab_mu);
    return ab.json();
  }

  void report() {
    engine.set_paused(true);
    loopgate::SyncTable table = engine.table();
    std::string region = roi.empty()           ? "whole process"
                         : roi == "profiler"   ? "cuProfilerStart..Stop"
                         : iteration_roi()     ? "marked iterations " + std::to_string(roi_first) + "-" + std::to_string(roi_last)
                                               : "NVTX range \"" + roi + "\"";
    bool counted = false;
    for (const auto& [iter, by_site] : table)
      for (const auto& [key, t] : by_site) counted = counted || t.syncs() + t.pageable_async + t.stalls > 0;
    if (!counted) {  // a helper process (a data loader, a compiler) or a region that never opened
      std::fprintf(stderr, "loopgate-cupti: pid %d counted no host sync in its region (%s); no table written\n",
                   static_cast<int>(getpid()), region.c_str());
      return;
    }
    char title[640];
    std::snprintf(title, sizeof title,
                  "loopgate-cupti: host syncs per iteration per call site (pid %d; region: %s; iterations: %s, %lld "
                  "seen; Python sites: %s; stalls: other calls >= %.3f ms)",
                  static_cast<int>(getpid()), region.c_str(),
                  g_marked_iterations.load() > 0 ? "marked function" : ("NVTX \"" + iter_prefix + "*\"").c_str(),
                  static_cast<long long>(iterations_seen.load()), python_note.empty() ? "read" : python_note.c_str(),
                  engine.slow_call_ms());
    std::string text = loopgate::format_sync_table(table, title, {}, 16);
    text += loopgate::format_driver_calls(engine.driver_calls(), 14);
    std::string out = per_process(env_or(loopgate::sync_file::kEnvText, ""));
    FILE* f = out.empty() ? stderr : std::fopen(out.c_str(), "a");
    if (f == nullptr) f = stderr;
    std::fputs(text.c_str(), f);
    if (f != stderr) std::fclose(f);
    std::string json = per_process(env_or(loopgate::sync_file::kEnvJson, ""));
    if (!json.empty()) {
      std::FILE* j = std::fopen(json.c_str(), "w");
      if (j) {
        std::fputs(json_report(table, region).dump(1).c_str(), j);
        std::fputs("\n", j);
        std::fclose(j);
      }
    }
    std::string csv = per_process(env_or(loopgate::sync_file::kEnvCsv, ""));
    if (!csv.empty()) {
      FILE* c = std::fopen(csv.c_str(), "w");
      if (c) {
        std::fprintf(c, "iteration,site,synchronizes,sync_memcpys,pageable_async,stalls,driver_calls,blocked_ms,"
                        "sync_ms,max_call_ms,slowest_call\n");
        for (const auto& [iter, sites] : table)
          for (const auto& [s, t] : sites)
            std::fprintf(c, "%lld,\"%s\",%lld,%lld,%lld,%lld,%lld,%.4f,%.4f,%.4f,%s\n", static_cast<long long>(iter),
                         s.c_str(), static_cast<long long>(t.synchronizes), static_cast<long long>(t.sync_memcpys),
                         static_cast<long long>(t.pageable_async), static_cast<long long>(t.stalls),
                         static_cast<long long>(t.driver_calls), t.blocked_ms, t.sync_ms, t.max_call_ms,
                         t.slowest_call.c_str());
        std::fclose(c);
      }
    }
  }
};

thread_local std::vector<std::string> Injection::t_stack;

Injection* g_injection = nullptr;
std::mutex g_init_mu;

void at_exit_report() {
  if (g_injection) g_injection->report();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_injection) return 1;
  // NVTX ranges (regions, iterations, fallback sites) unless LOOPGATE_CUPTI_NVTX=0: then every NVTX call of the
  // program (NCCL's per collective among them) stays the no-op it is without an injection.
  const bool nvtx = env_or(loopgate::sync_file::kEnvNvtx, "1") != "0";
  Dl_info cupti_lib{};  // NVTX's injection: the libcupti this library already loaded
  if (nvtx && dladdr(reinterpret_cast<void*>(&cuptiSubscribe_v2), &cupti_lib) != 0 && cupti_lib.dli_fname)
    setenv("NVTX_INJECTION64_PATH", cupti_lib.dli_fname, /*overwrite=*/0);
  auto* inj = new Injection();  // never freed: callbacks may run during process teardown
  inj->skip_libs = split_csv(env_or(loopgate::sync_file::kEnvSkipLibs, ""));
  for (const std::string& s : split_csv(env_or(loopgate::sync_file::kEnvSkipPython, ""))) inj->skip_python.push_back(s);
  if (inj->roi.rfind("iters:", 0) == 0) {
    long long a = 0, b = -1;
    if (std::sscanf(inj->roi.c_str() + 6, "%lld-%lld", &a, &b) != 2 || a < 1 || b < a) {
      std::fprintf(stderr, "loopgate-cupti: LOOPGATE_CUPTI_ROI '%s': expected iters:A-B with 1 <= A <= B\n",
                   inj->roi.c_str());
      delete inj;
      return 0;
    }
    inj->roi_first = a;
    inj->roi_last = b;
  }
  inj->python_note = loopgate::pystack::unavailable_reason();
  inj->engine.set_slow_call_us(loopgate::cupti::slow_call_us_from_env());
  if (env_or(loopgate::sync_file::kEnvAllCalls, "") != "1")
    inj->engine.set_counted_calls_only(env_or(loopgate::sync_file::kEnvLaunches, "") == "1");
  std::string why;
  if (!inj->engine.start("loopgate-sync-inject", inj, /*want_nvtx=*/nvtx, &why)) {
    std::fprintf(stderr, "loopgate-cupti: cannot count syncs in this process: %s\n", why.c_str());
    delete inj;
    return 0;
  }
  g_injection = inj;
  const int64_t marked = g_marked_iterations.load();
  if (marked > 0) inj->marked_iteration(marked);
  std::atexit(at_exit_report);
  return 1;
}

// The iteration marker: the Python shim (tools/cupti/pyshim) calls it on entry to the marked function.
extern "C" __attribute__((visibility("default"))) void loopgate_sync_iteration(void) {
  const int64_t n = g_marked_iterations.fetch_add(1) + 1;
  if (g_injection) g_injection->marked_iteration(n);
}

// The shim's reads: while on, the calling thread's driver calls are not counted (loopgate_values.py).
extern "C" __attribute__((visibility("default"))) void loopgate_sync_uncharged(int on) { t_uncharged = on != 0; }
