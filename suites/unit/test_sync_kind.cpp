// Unit tests for the sync counter's kinds (tools/cupti/sync_kind.h), the CPU guard of what only a GPU shows: a
// stream synchronize right after a device-to-host copy on that stream is the copy's wait (.item() at most 8 bytes,
// a larger D2H copy otherwise); on another stream, or after a blocking call consumed the copy, it is a plain
// stream synchronize; the other blocking calls keep their names.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 swaps the expected kinds, so every test here fails.
#include <gtest/gtest.h>

#include "suites/unit/wrong.h"
#include "tools/cupti/sync_kind.h"

namespace loopgate::cupti {
namespace {

int stream_a = 0, stream_b = 0;  // two streams: only their addresses matter
const void* const a = &stream_a;
const void* const b = &stream_b;

std::string item() { return wrong() ? "stream synchronize" : ".item() (scalar D2H + stream sync)"; }
std::string plain() { return wrong() ? ".item() (scalar D2H + stream sync)" : "stream synchronize"; }

TEST(SyncKind, AStreamSyncAfterACopyIsThatCopysWait) {
  const IssuedCopy scalar{true, 4, a}, tensor{true, 4096, a}, upload{false, 4, a};
  EXPECT_EQ(sync_kind(BlockingCall::kStreamSynchronize, a, scalar, "cuStreamSynchronize"), item());
  EXPECT_EQ(sync_kind(BlockingCall::kStreamSynchronize, a, IssuedCopy{true, 8, a}, nullptr), item()) << "8 bytes";
  EXPECT_EQ(sync_kind(BlockingCall::kStreamSynchronize, a, tensor, nullptr),
            wrong() ? item() : "D2H copy + stream sync");
  EXPECT_EQ(sync_kind(BlockingCall::kStreamSynchronize, b, scalar, nullptr), plain()) << "another stream";
  EXPECT_EQ(sync_kind(BlockingCall::kStreamSynchronize, a, upload, nullptr), plain()) << "a host-to-device copy";
  EXPECT_EQ(sync_kind(BlockingCall::kStreamSynchronize, a, IssuedCopy{}, nullptr), plain()) << "no copy before";
}

TEST(SyncKind, ABlockingCallConsumesTheCopyBeforeIt) {
  const IssuedCopy scalar{true, 4, a};
  IssuedCopy last = copy_after(IssuedCopy{}, scalar, /*blocking=*/false);  // the async copy itself
  last = copy_after(last, IssuedCopy{}, /*blocking=*/false);              // a launch between: still the copy's
  EXPECT_EQ(sync_kind(BlockingCall::kStreamSynchronize, a, last, nullptr), item());
  last = copy_after(last, IssuedCopy{}, /*blocking=*/true);  // the sync that waited for it
  EXPECT_EQ(sync_kind(BlockingCall::kStreamSynchronize, a, last, nullptr), plain()) << "a second sync waits for nothing";
}

TEST(SyncKind, TheOtherBlockingCallsKeepTheirNames) {
  const IssuedCopy none;
  EXPECT_EQ(sync_kind(BlockingCall::kEventSynchronize, nullptr, none, nullptr),
            wrong() ? "device synchronize" : "event synchronize");
  EXPECT_EQ(sync_kind(BlockingCall::kDeviceSynchronize, nullptr, none, nullptr),
            wrong() ? "event synchronize" : "device synchronize");
  EXPECT_EQ(sync_kind(BlockingCall::kSyncMemcpy, nullptr, none, "cuMemcpyDtoH_v2"),
            wrong() ? "stall (cuMemcpyDtoH_v2)" : "synchronous copy (cuMemcpyDtoH_v2)");
  EXPECT_EQ(sync_kind(BlockingCall::kPageableAsync, nullptr, none, "cuMemcpyHtoDAsync_v2"),
            wrong() ? "stall (cuMemcpyHtoDAsync_v2)" : "pageable copy (cuMemcpyHtoDAsync_v2)");
  EXPECT_EQ(sync_kind(BlockingCall::kStall, nullptr, none, nullptr), wrong() ? "stall ()" : "stall (?)");
}

}  // namespace
}  // namespace loopgate::cupti
