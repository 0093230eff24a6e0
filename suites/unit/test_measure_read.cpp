// The batched read's copy stream on CPU (trainer/measure/async_copy.h, CopyStream): under --async-emulation a
// copy lands at the wait (or, seeded, at once) and reads its source then, so a source the read did not keep, and
// the caller let go, is memory a device's allocator would have handed on: a race, and the buffer keeps its NaN.
// A read whose copy stream lost its keep (a record_stream left out) would pass every CPU gate without this (the
// planted defect-race-copy-source-unkept). Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every expectation.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "fixtures/defects/mutations.h"  // copy_stream_without_keep: the planted defect's copy stream
#include "suites/unit/wrong.h"
#include "trainer/measure/async_copy.h"
#include "trainer/measure/ledger.h"

namespace loopgate {
namespace {

std::unique_ptr<CopyStream> emulated_stream(Ledger& ledger, uint64_t seed) {
  return make_copy_stream(ledger, Site::kBatchedLogRead, AsyncEmulation{true, seed}, DeviceStress{}, 0);
}

// Reads n values that only the read itself could still hold after issue; the NaNs it lands.
int landed_nans(AsyncRead& read, int n) {
  int nans = 0;
  for (int i = 0; i < n; ++i) {
    read.issue(at::full({3}, 1.0 + i, at::kDouble));  // a temporary, as Bundle::issue's packed values
    read.wait();
    for (double v : read.values()) nans += std::isnan(v) ? 1 : 0;
  }
  return nans;
}

TEST(EmulatedRead, AKeptSourceLandsItsValuesAfterTheCallerLetItGo) {
  Ledger ledger;
  auto read = make_async_read(ledger, Site::kBatchedLogRead, emulated_stream(ledger, 11));
  EXPECT_EQ(landed_nans(*read, 16), 0 + wrong());
  EXPECT_EQ(ledger.async_races(), 0 + wrong());
}

TEST(EmulatedRead, AnUnkeptSourceLetGoBeforeItsCopyLandedIsARace) {
  Ledger ledger;
  auto read = make_async_read(ledger, Site::kBatchedLogRead, copy_stream_without_keep(emulated_stream(ledger, 11)));
  const int nans = landed_nans(*read, 16);
  EXPECT_GT(ledger.async_races(), 0 + wrong()) << "16 copies, each landing at once one time in four";
  EXPECT_EQ(nans, 3 * ledger.async_races() + wrong()) << "each lost copy leaves its 3 values NaN";
}

TEST(EmulatedRead, AnUnkeptSourceTheCallerStillHoldsIsNoRace) {
  Ledger ledger;
  auto read = make_async_read(ledger, Site::kBatchedLogRead, copy_stream_without_keep(emulated_stream(ledger, 11)));
  const at::Tensor held = at::full({3}, 2.5, at::kDouble);
  read->issue(held.view({3}));  // a view: the memory is the caller's tensor's, still alive
  read->wait();
  EXPECT_EQ(read->values()[0], 2.5 + wrong());
  EXPECT_EQ(ledger.async_races(), 0 + wrong());
}

// The emulation's own rule, whatever the source: a copy issued into a buffer whose last copy has not landed is a
// race, with the source kept and still held by the caller (the buffer-reuse race: the earlier copy is lost). An
// emulation that counted it only when the source was gone (weakened, planted by hand: 0 races here) fails this.
TEST(EmulatedRead, AnIssueIntoABufferWhoseCopyHasNotLandedIsARaceWhateverItsSource) {
  int expected = 0, pending = 0;
  Ledger ledger;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    auto stream = emulated_stream(ledger, seed);
    at::Tensor dest = at::empty({3}, at::kDouble);
    const at::Tensor source = at::full({3}, 1.5, at::kDouble);  // held by the caller and kept
    stream->keep(source);
    stream->copy(dest, source);
    const bool landed_at_once = !std::isnan(dest[0].item<double>());
    expected += landed_at_once ? 0 : 1;
    pending += landed_at_once ? 0 : 1;
    stream->copy(dest, source);  // the next read into the same buffer, before a wait
    stream->wait();
  }
  EXPECT_GT(pending, 0) << "of 16 seeds, a copy lands at once one time in four";
  EXPECT_EQ(ledger.async_races(), expected + wrong());
}

TEST(EmulatedRead, TheCopyReadsItsSourceWhenItLands) {
  // A source rewritten after issue, before the wait: a device copy on its own stream may read either; the
  // emulation reads the later, so a caller that rewrites what it issued shows as a changed value.
  Ledger ledger;
  int later = 0, at_issue = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    auto read = make_async_read(ledger, Site::kBatchedLogRead, emulated_stream(ledger, seed));
    at::Tensor source = at::zeros({1}, at::kDouble);
    read->issue(source);
    source.fill_(4.0);
    read->wait();
    later += read->values()[0] == 4.0 ? 1 : 0;
    at_issue += read->values()[0] == 0.0 ? 1 : 0;
  }
  EXPECT_GT(later, 0) << "of 8 seeds, each copy landing at once one time in four";
  EXPECT_EQ(later + at_issue, 8 + wrong()) << "a copy lands the source as it was at its issue or at its wait";
}

TEST(PlainRead, ACpuCopyLandsAtItsIssue) {
  Ledger ledger;
  auto read = make_async_read(ledger, Site::kBatchedLogRead, AsyncEmulation{}, DeviceStress{}, 0);
  at::Tensor source = at::full({2}, 1.5, at::kFloat);
  read->issue(source);
  source.fill_(9.0);
  read->wait();
  EXPECT_EQ(read->values()[1], 1.5 + wrong());
  EXPECT_EQ(ledger.count(0, Site::kBatchedLogRead), 1 + wrong());
}

}  // namespace
}  // namespace loopgate
