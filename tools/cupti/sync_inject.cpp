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
#include <dlfcn.h>
#include <unistd.h>
#include <generated_nvtx_meta.h>
#include <nvtx3/nvToolsExt.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "tools/cupti/py_stack.h"
#include "tools/cupti/sync_kind.h"
#include "tools/cupti/sync_region.h"
#include "tools/cupti/sync_report.h"
#include "tools/cupti/sync_sites.h"
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

// The counter in this process: CUPTI's engine, the region and iterations (sync_region.h), where a call is charged
// (sync_sites.h), and the files at exit (sync_report.h).
struct Injection : loopgate::cupti::Hooks {
  loopgate::cupti::Engine engine;
  loopgate::cupti::SyncRegion region;
  loopgate::cupti::SyncSites sites;
  std::string python_note;

  // A marked iteration: the counter follows the marker alone (NVTX markers are then ignored).
  void marked_iteration(int64_t n) {
    if (const std::optional<bool> callbacks = region.begin_marked(n)) engine.set_driver_calls(*callbacks);
    region.end_marked();
  }

  static const char* ascii(const nvtxEventAttributes_t* a) {
    return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : nullptr;
  }

  void on_nvtx(CUpti_CallbackId cbid, const void* data) override {
    const auto* d = static_cast<const CUpti_NvtxData*>(data);
    const void* p = d->functionParams;
    const bool markers = g_marked_iterations.load() > 0;
    const auto push = [&](const char* name) { region.push(name, markers); };
    const auto mark = [&](const char* name) { region.mark(name, markers); };
    switch (cbid) {
      case CUPTI_CBID_NVTX_nvtxRangePushA: push(static_cast<const nvtxRangePushA_params*>(p)->message); break;
      case CUPTI_CBID_NVTX_nvtxRangePushEx: push(ascii(static_cast<const nvtxRangePushEx_params*>(p)->eventAttrib)); break;
      case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
        push(ascii(static_cast<const nvtxDomainRangePushEx_params*>(p)->core.eventAttrib));
        break;
      case CUPTI_CBID_NVTX_nvtxRangePop:
      case CUPTI_CBID_NVTX_nvtxDomainRangePop: region.pop(); break;
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

  void on_profiler(bool start) override { region.set_profiler(start); }

  void on_driver_call(CUpti_CallbackId cbid, const void* params, CallKind kind) override {
    const char* name = nullptr;
    if (kind != CallKind::kSynchronize) cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name);
    const void* stream = nullptr;
    t_kind = loopgate::cupti::sync_kind(blocking_call(cbid, params, kind, &stream), stream, t_last_copy, name);
    t_last_copy = loopgate::cupti::copy_after(t_last_copy, copy_of(cbid, params), kind != CallKind::kOther);
  }

  bool attribute(CallKind kind, double ms, int64_t* it, std::string* site) override {
    if (!region.in_roi() || t_uncharged) return false;
    *it = region.iteration();
    const bool matters = kind != CallKind::kOther || ms >= engine.slow_call_ms();
    *site = matters ? sites.charge(t_kind, region) : "(other driver calls)";
    return true;
  }

  void report() {
    using namespace loopgate::cupti;
    engine.set_paused(true);
    loopgate::SyncTable table = engine.table();
    const std::string where = region.describe();
    bool counted = false;
    for (const auto& [iter, by_site] : table)
      for (const auto& [key, t] : by_site) counted = counted || t.syncs() + t.pageable_async + t.stalls > 0;
    if (!counted) {  // a helper process (a data loader, a compiler) or a region that never opened
      std::fprintf(stderr, "loopgate-cupti: pid %d counted no host sync in its region (%s); no table written\n",
                   static_cast<int>(getpid()), where.c_str());
      return;
    }
    const std::string python = python_note.empty() ? "read" : python_note;
    char title[640];
    std::snprintf(title, sizeof title,
                  "loopgate-cupti: host syncs per iteration per call site (pid %d; region: %s; iterations: %s, %lld "
                  "seen; Python sites: %s; stalls: other calls >= %.3f ms)",
                  static_cast<int>(getpid()), where.c_str(),
                  g_marked_iterations.load() > 0 ? "marked function"
                                                 : ("NVTX \"" + region.iteration_prefix() + "*\"").c_str(),
                  static_cast<long long>(region.iterations_seen()), python.c_str(), engine.slow_call_ms());
    std::string text = loopgate::format_sync_table(table, title, {}, 16);
    text += loopgate::format_driver_calls(engine.driver_calls(), 14);
    write_text(per_process(env_or(loopgate::sync_file::kEnvText, "")), text);
    const ProcessFacts facts{where, region.iterations_seen(), python, region.overhead_ab()};
    const std::string json = per_process(env_or(loopgate::sync_file::kEnvJson, ""));
    if (!json.empty()) write_json(json, process_json(table, facts, sites));
    write_csv(per_process(env_or(loopgate::sync_file::kEnvCsv, "")), table);
  }
};

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
  std::string why;
  if (!inj->region.configure(&why)) {
    std::fprintf(stderr, "loopgate-cupti: %s\n", why.c_str());
    delete inj;
    return 0;
  }
  inj->sites.configure();
  inj->python_note = loopgate::pystack::unavailable_reason();
  inj->engine.set_slow_call_us(loopgate::cupti::slow_call_us_from_env());
  if (env_or(loopgate::sync_file::kEnvAllCalls, "") != "1")
    inj->engine.set_counted_calls_only(env_or(loopgate::sync_file::kEnvLaunches, "") == "1");
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
