// The host-cost microbenchmarks (host_forms.h). The forms themselves are plain ATen calls, compiled on CPU too;
// only the drain between iterations needs the GPU tier.
#include "suites/bench/host_forms.h"

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "trainer/common/error.h"
#if LOOPGATE_HAS_CUDA
#include "trainer/timers/device_cuda.h"
#endif

namespace loopgate::bench {
namespace {

enum class Form {
  kTensorPageableH2D,  // at::tensor(values, cuda): a pageable host-to-device copy the host waits for
  kFull,               // at::full: a fill kernel, enqueued
  kZeros,              // at::zeros
  kFill,               // fill_ on an existing tensor
  kD2HPageable,        // host_pageable.copy_(device, non_blocking=true)
  kD2HPinned,          // host_pinned.copy_(device, non_blocking=true)
  kH2DPageable,        // device.copy_(host_pageable, non_blocking=true)
  kH2DPinned,          // device.copy_(host_pinned, non_blocking=true)
};

struct FormInfo {
  Form form;
  const char* name;
};
const std::vector<FormInfo>& forms() {
  static const std::vector<FormInfo> all{
      {Form::kTensorPageableH2D, "tensor_pageable_h2d"}, {Form::kFull, "full"},
      {Form::kZeros, "zeros"},                          {Form::kFill, "fill_"},
      {Form::kD2HPageable, "copy_d2h_pageable_nonblocking"}, {Form::kD2HPinned, "copy_d2h_pinned_nonblocking"},
      {Form::kH2DPageable, "copy_h2d_pageable_nonblocking"}, {Form::kH2DPinned, "copy_h2d_pinned_nonblocking"}};
  return all;
}

// Waits for the device: between timed calls only, so each starts behind the same pending work.
void drain() {
#if LOOPGATE_HAS_CUDA
  cuda_device_synchronize();
#else
  LG_CHECK(false, "host_form benchmarks need the GPU tier");
#endif
}

// Work the device is still busy with when the timed call is made: a chain of bf16 8192^3 matmuls (~1.5 ms each on
// an H200), long against any copy or fill here.
class PendingWork {
 public:
  PendingWork() {
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
    a_ = at::randn({kN, kN}, opts);
    b_ = at::randn({kN, kN}, opts);
    enqueue();  // first use (cuBLAS handles, workspace) outside the measurement
    drain();
    const auto t0 = std::chrono::steady_clock::now();
    enqueue();
    drain();
    ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  void enqueue() {
    for (int i = 0; i < kMatmuls; ++i) c_ = at::mm(a_, b_);
  }
  double ms() const { return ms_; }  // enqueue + drain, measured once

 private:
  static constexpr int64_t kN = 8192;
  static constexpr int kMatmuls = 16;
  at::Tensor a_, b_, c_;
  double ms_ = 0.0;
};

struct Buffers {
  explicit Buffers(int64_t n)
      : values(static_cast<size_t>(n), 1.5f),
        device(at::zeros({n}, at::TensorOptions().device(at::kCUDA).dtype(at::kFloat))),
        host_pageable(at::zeros({n}, at::kFloat)),
        host_pinned(at::empty({n}, at::TensorOptions().dtype(at::kFloat).pinned_memory(true)).zero_()) {}
  std::vector<float> values;
  at::Tensor device, host_pageable, host_pinned, made;
};

void call_form(Form form, Buffers& b) {
  const auto dev = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const int64_t n = b.device.numel();
  switch (form) {
    case Form::kTensorPageableH2D: b.made = at::tensor(at::ArrayRef<float>(b.values), dev); break;
    case Form::kFull: b.made = at::full({n}, 1.5, dev); break;
    case Form::kZeros: b.made = at::zeros({n}, dev); break;
    case Form::kFill: b.device.fill_(1.5); break;
    case Form::kD2HPageable: b.host_pageable.copy_(b.device, /*non_blocking=*/true); break;
    case Form::kD2HPinned: b.host_pinned.copy_(b.device, /*non_blocking=*/true); break;
    case Form::kH2DPageable: b.device.copy_(b.host_pageable, /*non_blocking=*/true); break;
    case Form::kH2DPinned: b.device.copy_(b.host_pinned, /*non_blocking=*/true); break;
  }
}

void run_host_form(benchmark::State& state, Form form) {
  Buffers b(state.range(0));
  PendingWork pending;
  call_form(form, b);  // first use (allocator blocks, pinned staging) outside the measurement
  drain();
  for (auto _ : state) {
    pending.enqueue();
    const auto t0 = std::chrono::steady_clock::now();
    call_form(form, b);
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    drain();
  }
  state.counters["pending_ms"] = pending.ms();
}

}  // namespace

bool register_host_form_benchmarks() {
#if LOOPGATE_HAS_CUDA
  if (!at::hasCUDA()) return false;
  for (const FormInfo& f : forms()) {
    const Form form = f.form;
    benchmark::RegisterBenchmark((std::string("host_form/") + f.name).c_str(),
                                 [form](benchmark::State& state) {
                                   try {  // never unwind through Google Benchmark
                                     run_host_form(state, form);
                                   } catch (const std::exception& e) {
                                     std::fprintf(stderr, "loopgate_bench: host_form: %s\n", e.what());
                                     std::fflush(stderr);
                                     std::abort();
                                   }
                                 })
        ->Arg(1)
        ->Arg(1 << 20)
        ->UseManualTime()
        ->Iterations(20)
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
#else
  (void)&run_host_form;
  (void)&forms;
  return false;
#endif
}

}  // namespace loopgate::bench
