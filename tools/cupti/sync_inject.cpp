// libloopgate_sync_inject.so: the CUPTI sync counter loaded into ANY CUDA process, with no relinking:
//   CUDA_INJECTION64_PATH=/path/libloopgate_sync_inject.so \
//   NVTX_INJECTION64_PATH=/usr/local/cuda/lib64/libcupti.so  python3 train.py
// The driver calls InitializeInjection() at cuInit; at exit the library prints host syncs per iteration per
// call site (stderr, or the file LOOPGATE_CUPTI_OUT; LOOPGATE_CUPTI_CSV adds one CSV row per (iteration, site)).
//   region of interest  LOOPGATE_CUPTI_ROI: unset = the whole process; "profiler" = between cuProfilerStart and
//                       cuProfilerStop (cudaProfilerStart/Stop); anything else = inside NVTX ranges of that name.
//   iterations          each NVTX range push / range start / mark whose name starts with LOOPGATE_CUPTI_ITER
//                       (default "iteration") begins the next iteration; calls before the first are iteration 0.
//   call site           the innermost other NVTX range open on the calling thread; else, for calls that count
//                       (syncs, pageable copies, stalls), the first frame outside libcuda / libcudart / CUPTI /
//                       this library (dladdr on the return address, demangled; LOOPGATE_CUPTI_SKIP adds
//                       comma-separated library substrings to skip); else "(other driver calls)".
// NVTX callbacks need NVTX_INJECTION64_PATH pointing at libcupti.so; InitializeInjection sets it when unset,
// which covers programs whose first NVTX call comes after CUDA starts.
// One CUPTI subscriber per process: with this library loaded, the PyTorch profiler cannot subscribe.
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>
#include <generated_nvtx_meta.h>
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "trainer/measure/cupti_core.h"

namespace {

using loopgate::cupti::CallKind;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

struct Injection : loopgate::cupti::Hooks {
  loopgate::cupti::Engine engine;
  std::string roi = env_or("LOOPGATE_CUPTI_ROI", "");
  std::string iter_prefix = env_or("LOOPGATE_CUPTI_ITER", "iteration");
  std::vector<std::string> skip_libs;
  std::atomic<int> roi_depth{0};
  std::atomic<bool> profiler_on{false};
  std::atomic<int64_t> iteration{0};
  std::atomic<int64_t> iterations_seen{0};
  std::mutex sym_mu;
  std::unordered_map<void*, std::string> sym_cache;

  bool in_roi() const {
    if (roi.empty()) return true;
    if (roi == "profiler") return profiler_on.load();
    return roi_depth.load() > 0;
  }

  // ---- NVTX: region, iterations, site stack ----
  static thread_local std::vector<std::string> t_stack;

  void push(const char* name) {
    std::string n = name ? name : "(unnamed range)";
    if (!roi.empty() && roi != "profiler" && n == roi) roi_depth.fetch_add(1);
    if (n.rfind(iter_prefix, 0) == 0) begin_iteration();
    t_stack.push_back(std::move(n));
  }
  void pop() {
    if (t_stack.empty()) return;
    if (!roi.empty() && roi != "profiler" && t_stack.back() == roi) roi_depth.fetch_sub(1);
    t_stack.pop_back();
  }
  void mark(const char* name) {
    if (name && std::string(name).rfind(iter_prefix, 0) == 0) begin_iteration();
  }
  void begin_iteration() {
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
      if (!roi.empty() && *it == roi) continue;
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

  bool attribute(CallKind kind, double ms, int64_t* it, std::string* site) override {
    if (!in_roi()) return false;
    *it = iteration.load();
    *site = innermost_range();
    if (site->empty()) {
      const bool matters = kind != CallKind::kOther || ms >= engine.slow_call_ms();
      *site = matters ? calling_frame() : "(other driver calls)";
    }
    return true;
  }

  void report() {
    engine.set_paused(true);
    loopgate::SyncTable table = engine.table();
    std::string region = roi.empty() ? "whole process" : roi == "profiler" ? "cuProfilerStart..Stop"
                                                                            : "NVTX range \"" + roi + "\"";
    char title[512];
    std::snprintf(title, sizeof title,
                  "loopgate-cupti: host syncs per iteration per call site (pid %d; region: %s; iterations: NVTX "
                  "\"%s*\", %lld seen; stalls: other calls >= %.3f ms)",
                  static_cast<int>(getpid()), region.c_str(), iter_prefix.c_str(),
                  static_cast<long long>(iterations_seen.load()), engine.slow_call_ms());
    std::string text = loopgate::format_sync_table(table, title, {}, 16);
    text += loopgate::format_driver_calls(engine.driver_calls(), 14);
    std::string out = env_or("LOOPGATE_CUPTI_OUT", "");
    FILE* f = out.empty() ? stderr : std::fopen(out.c_str(), "a");
    if (f == nullptr) f = stderr;
    std::fputs(text.c_str(), f);
    if (f != stderr) std::fclose(f);
    std::string csv = env_or("LOOPGATE_CUPTI_CSV", "");
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
  Dl_info cupti_lib{};  // NVTX's injection: the libcupti this library already loaded
  if (dladdr(reinterpret_cast<void*>(&cuptiSubscribe_v2), &cupti_lib) != 0 && cupti_lib.dli_fname)
    setenv("NVTX_INJECTION64_PATH", cupti_lib.dli_fname, /*overwrite=*/0);
  auto* inj = new Injection();  // never freed: callbacks may run during process teardown
  std::string skip = env_or("LOOPGATE_CUPTI_SKIP", "");
  for (size_t pos = 0; !skip.empty() && pos != std::string::npos;) {
    size_t next = skip.find(',', pos);
    std::string item = skip.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    if (!item.empty()) inj->skip_libs.push_back(item);
    pos = next == std::string::npos ? next : next + 1;
  }
  inj->engine.set_slow_call_us(loopgate::cupti::slow_call_us_from_env());
  std::string why;
  if (!inj->engine.start("loopgate-sync-inject", inj, /*want_nvtx=*/true, &why)) {
    std::fprintf(stderr, "loopgate-cupti: cannot count syncs in this process: %s\n", why.c_str());
    delete inj;
    return 0;
  }
  g_injection = inj;
  std::atexit(at_exit_report);
  return 1;
}
