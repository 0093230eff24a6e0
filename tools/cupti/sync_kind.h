// What a host sync was, named as a PyTorch user knows it (the sync counter's "kind" column), from the blocking
// call and the copy the same thread issued just before it. CUDA-free, so CPU tests pin it (suites/unit/
// test_sync_kind.cpp); tools/cupti/sync_inject.cpp maps the driver's callbacks onto it.
#pragma once
#include <cstddef>
#include <string>

namespace loopgate::cupti {

enum class BlockingCall { kStreamSynchronize, kEventSynchronize, kDeviceSynchronize, kSyncMemcpy, kPageableAsync, kStall };

// A copy the thread put on a stream without waiting (an async device-to-host or other copy).
struct IssuedCopy {
  bool d2h = false;
  size_t bytes = 0;
  const void* stream = nullptr;
};

// `stream`: the stream a kStreamSynchronize waits for; `function`: the driver call's name ("?" when unknown).
// A stream synchronize right after a device-to-host copy on that stream is the copy's wait: torch's .item() (at
// most 8 bytes) or .cpu() / .tolist().
std::string sync_kind(BlockingCall call, const void* stream, const IssuedCopy& last, const char* function);

// The copy the next sync sees: this call's copy if it issued one; none after a blocking call (it consumed the
// copy before it); otherwise the one before.
IssuedCopy copy_after(const IssuedCopy& last, const IssuedCopy& this_call, bool blocking);

}  // namespace loopgate::cupti
