// The one path for host <-> device copies that do not block. Each read owns its pinned host buffer and the copy
// stream that fills it: issue() starts a non-blocking device-to-host copy into the buffer on the read's own stream,
// behind the work the current stream has queued (so the copy does not hold up the step after it), and keeps the
// source's memory from the allocator until the copy lands; wait() waits for it (the host read, counted in the
// Ledger at the read's site); values() reads the buffer, right only after the wait. upload() stages host values in
// pinned memory and copies them without a wait: stream order guards every device consumer, and LibTorch's host
// allocator keeps the staging buffer until its copy is done. The source scan (loop_code) rejects a non-blocking
// copy or a pinned buffer anywhere else in trainer/.
//
// A CPU rank copies synchronously, so a read that skips its wait is right by luck. --async-emulation
// (AsyncEmulation) makes the CPU behave as a device that runs behind: a read's copy lands at its wait or, seeded, at
// its issue, never earlier, and reads its source then; until it lands the buffer holds a NaN poison. An issue into
// a buffer whose copy has not landed, and a copy whose source's memory was let go before it landed (the allocator
// would have handed it on), are recorded as races (Ledger::async_races). The timers' events get the same
// treatment from RunConfig::event_lag.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "trainer/measure/ledger.h"
#include "trainer/parallel/comm.h"

namespace loopgate {

struct AsyncEmulation {
  bool on = false;
  uint64_t seed = 0;  // with the rank and the site: which copies land at their issue
};

// --stress on a GPU: before each read's copy the buffer is poisoned (NaN) and the copy stream spins a seeded,
// rank-asymmetric 1..4 ms (ATen's CUDA sleep kernel), so the host runs far ahead of the copy it issued; before the
// read's wait, the allocator is asked for blocks of the source's size on the current stream, and one it hands out
// over a source whose copy may not have landed is overwritten (NaN), as the step's next allocation would.
struct DeviceStress {
  bool on = false;
  uint64_t seed = 0;
};

// The stream a read's copies run on. The copy reads its source after the caller may have let it go, so the
// source's memory must stay the source's until the copy lands: keep() (a GPU's record_stream) tells the allocator.
class CopyStream {
 public:
  virtual ~CopyStream() = default;
  // `dest` (on the host, pinned on a GPU; `source`'s numel and dtype) gets `source`'s values when the copy lands.
  virtual void copy(at::Tensor& dest, const at::Tensor& source) = 0;
  // `source`'s memory is not handed to another tensor before the copies issued so far land.
  virtual void keep(const at::Tensor& source) = 0;
  // The host blocks until every copy issued has landed (the caller counts the read).
  virtual void wait() = 0;
};
// A CUDA stream of its own on a GPU run; on CPU, a copy at once (emulated when asked). Seeded by rank and site.
std::unique_ptr<CopyStream> make_copy_stream(Ledger& ledger, Site site, const AsyncEmulation& emulation,
                                             const DeviceStress& stress, int rank);

class AsyncRead {
 public:
  virtual ~AsyncRead() = default;
  virtual void issue(const at::Tensor& values) = 0;  // any dtype, read as double; [n] on the run's device
  virtual void wait() = 0;                           // blocks until the copy landed; counts the read
  virtual std::vector<double> values() const = 0;    // the buffer as it is now
};

// A read at `site` through `stream`: pinned memory on a GPU run, a plain buffer on CPU.
std::unique_ptr<AsyncRead> make_async_read(Ledger& ledger, Site site, std::unique_ptr<CopyStream> stream);
// The same through make_copy_stream's stream.
std::unique_ptr<AsyncRead> make_async_read(Ledger& ledger, Site site, const AsyncEmulation& emulation,
                                           const DeviceStress& stress, int rank);

// The batch's uploads: each host tensor staged (pinned on a GPU) and copied to the device without a wait. The
// copy reads its stage when the stream reaches it, so a stage rewritten before then feeds the device the new
// values. A stage that is already pinned is copied from as it is (pin_memory returns it), so a caller that reuses
// one must not rewrite it before the copy lands. On CPU the staging path runs too: the "device" tensor is a copy
// in memory of its own, as on a GPU; under --async-emulation every stage is held until the host next waits on the
// device (any Ledger wait: a copy lands by then), and a stage rewritten before that is a race
// (Ledger::async_races). --stress on a GPU: each copy waits behind a seeded 1..4 ms of spinning.
class Upload {
 public:
  virtual ~Upload() = default;
  virtual at::Tensor copy(const at::Tensor& host) = 0;  // `host` on the run's device
};
std::unique_ptr<Upload> make_upload(Ledger& ledger, c10::Device device, const AsyncEmulation& emulation,
                                    const DeviceStress& stress, int rank);

// The stage every upload copies from, on every device: the memory its copy reads when the stream reaches it. Pinned
// on a GPU (pin_memory hands an already pinned tensor back as it is); on CPU the host tensor itself. One function
// for both, so the CPU emulation (--async-emulation) watches the stage a GPU's copy reads, not a stand-in for it.
at::Tensor upload_stage(const at::Tensor& host, c10::Device device);

// Host values (or a host tensor) on the device with `options`' dtype: one pinned, non-blocking copy (no read, no
// sync, no kernel: nothing is counted). CPU: the values as a CPU tensor. For tensors made once and never
// rewritten (tables, bundles); a batch goes through Upload.
at::Tensor upload(const std::vector<double>& values, const at::TensorOptions& options);
at::Tensor upload(const at::Tensor& host, c10::Device device);

#if LOOPGATE_HAS_CUDA
// The GPU form (async_copy_cuda.cpp).
std::unique_ptr<CopyStream> make_cuda_copy_stream(const DeviceStress& stress, uint64_t seed);
// --stress: every collective of `inner` waits behind a seeded 1..4 ms of spinning on the stream, so the host runs
// far ahead of the device at each one (seed: per rank, so the delays are rank-asymmetric).
CommPtr stressed_comm(CommPtr inner, uint64_t seed);
// --stress: a seeded 1..4 ms of spinning on the current stream (before a staging copy).
void stress_sleep(std::mt19937_64& rng);
#endif

}  // namespace loopgate
