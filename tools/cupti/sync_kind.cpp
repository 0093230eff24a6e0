// The sync counter's kinds (sync_kind.h).
#include "tools/cupti/sync_kind.h"

namespace loopgate::cupti {

std::string sync_kind(BlockingCall call, const void* stream, const IssuedCopy& last, const char* function) {
  const std::string name = function ? function : "?";
  switch (call) {
    case BlockingCall::kStreamSynchronize:
      if (last.d2h && last.stream == stream)
        return last.bytes <= 8 ? ".item() (scalar D2H + stream sync)" : "D2H copy + stream sync";
      return "stream synchronize";
    case BlockingCall::kEventSynchronize: return "event synchronize";
    case BlockingCall::kDeviceSynchronize: return "device synchronize";
    case BlockingCall::kSyncMemcpy: return "synchronous copy (" + name + ")";
    case BlockingCall::kPageableAsync: return "pageable copy (" + name + ")";
    case BlockingCall::kStall: break;
  }
  return "stall (" + name + ")";
}

IssuedCopy copy_after(const IssuedCopy& last, const IssuedCopy& this_call, bool blocking) {
  if (this_call.bytes > 0) return this_call;
  return blocking ? IssuedCopy{} : last;
}

}  // namespace loopgate::cupti
