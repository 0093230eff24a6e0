// Unit tests for the operator counter's sync rule: each spelling of an operator that synchronizes on CUDA (an
// output size or a value read back) counts one sync at the current site, once per outermost operator; the
// ledger's own reads (Suspend) and plain kernels count none. This is the CPU tier's prediction of what CUPTI
// counts on a GPU (issue: the CPU tier predicts GPU syncs).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every expectation, so every test here fails.
#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/measure/ledger.h"
#include "trainer/measure/op_counter.h"

namespace loopgate {
namespace {

// The syncs `body` makes at site "probe" of iteration 7.
int64_t syncs_of(const std::function<void()>& body) {
  OpCounter& c = OpCounter::instance();
  const bool was = c.enabled();
  c.set_enabled(true);
  c.reset();
  set_current_iteration(7);
  {
    ScopedSite site("probe");
    body();
  }
  c.set_enabled(was);
  const auto s = c.syncs(7);
  auto it = s.find("probe");
  return it == s.end() ? 0 : it->second;
}

const at::Tensor& values() {
  static const at::Tensor t = at::tensor({1.0f, std::nanf(""), 3.0f, 0.0f});
  return t;
}

TEST(OpCounterSyncs, EachDataDependentShapeOperatorCountsOne) {
  const at::Tensor& t = values();
  const at::Tensor mask = at::isnan(t);
  struct Case {
    const char* what;
    std::function<void()> body;
    int64_t syncs = 1;
  };
  const std::vector<Case> cases = {
      {"nonzero", [&] { (void)at::nonzero(mask); }},
      {"argwhere", [&] { (void)at::argwhere(mask); }},
      {"masked_select", [&] { (void)t.masked_select(mask); }},
      {"boolean-mask index", [&] { (void)t.index({mask}); }},
      {"boolean-mask index_put_", [&] { at::Tensor u = t.clone(); u.index_put_({mask}, 0.0); }},
      {"unique", [&] { (void)at::_unique2(t.nan_to_num()); }},
      {"unique_consecutive", [&] { (void)at::unique_consecutive(t.nan_to_num()); }},
      // Two reads in LibTorch: the repeats' non-negative check and the output size (their sum).
      {"repeat_interleave with tensor repeats", [&] { (void)at::repeat_interleave(at::tensor({1, 2}, at::kLong)); }, 2},
      {"item", [&] { (void)t[0].item<float>(); }},
      {"is_nonzero", [&] { (void)t[0].is_nonzero(); }},
      {"equal", [&] { (void)t.equal(t); }},
      {"allclose", [&] { (void)t.nan_to_num().allclose(t.nan_to_num()); }},
  };
  for (const Case& c : cases) EXPECT_EQ(syncs_of(c.body), c.syncs + wrong()) << c.what;
}

// Spellings the source scan cannot read (fixtures/loop_checks.cpp, unseen_reads): the operator is the same
// whatever names it, so each still counts one sync. docs/checks.md's spellings table: which guard owns which.
#define LG_PASTE(a, b) a##b
template <class T>
T first_of(const at::Tensor& t) {
  return t.template item<T>();
}

TEST(OpCounterSyncs, ReadsSpelledPastTheScanStillCount) {
  const at::Tensor one = values()[0];
  float (at::Tensor::*read)() const = &at::Tensor::item<float>;
  const std::vector<std::pair<const char*, std::function<void()>>> cases = {
      {"a member pointer, called with .*", [&] { (void)(one.*read)(); }},
      {"std::invoke of a member pointer", [&] { (void)std::invoke(read, one); }},
      {"a name pasted by a macro", [&] { (void)one.LG_PASTE(it, em)<float>(); }},
      {"a dependent template call", [&] { (void)first_of<double>(one); }},
      {"Python's bool(t): is_nonzero through a lambda", [&] { auto truth = [](const at::Tensor& t) { return t.is_nonzero(); }; (void)truth(one); }},
  };
  for (const auto& [what, body] : cases) EXPECT_EQ(syncs_of(body), 1 + wrong()) << what;
}
#undef LG_PASTE

TEST(OpCounterSyncs, KernelsAndViewsCountNone) {
  const at::Tensor& t = values();
  EXPECT_EQ(syncs_of([&] {
              at::Tensor m = at::isnan(t);
              at::Tensor w = at::where(m, at::zeros_like(t), t);
              (void)w.sum();
              (void)t.view({2, 2}).select(0, 1);
              (void)t.index({at::indexing::Slice(0, 2)});  // a slice: no mask, no size from the device
              (void)at::repeat_interleave(t, at::tensor({1, 1, 1, 1}, at::kLong), 0, /*output_size=*/4);
            }),
            0 + wrong());
}

TEST(OpCounterSyncs, TheLedgersReadsAreNotCountedAgain) {
  Ledger ledger;
  EXPECT_EQ(syncs_of([&] {
              (void)ledger.read(Site::kGradNorm, values());
              OpCounter::Suspend s;  // what the ledger does around its host-side work
              (void)values()[0].item<float>();
            }),
            0 + wrong());
}

TEST(OpCounterSyncs, CountedAtTheSiteAndIterationWhereTheyRan) {
  OpCounter& c = OpCounter::instance();
  c.set_enabled(true);
  c.reset();
  set_current_iteration(3);
  {
    ScopedSite site(site_name(Site::kNanCheckGrad));
    (void)values().index({at::isnan(values())});
    (void)values().index({at::isnan(values())});
  }
  set_current_iteration(4);
  {
    ScopedSite site("numerics");
    (void)values()[1].item<float>();
  }
  c.set_enabled(false);
  EXPECT_EQ(c.syncs(3), (std::map<std::string, int64_t>{{"nan_check_grad", 2 + wrong()}}));
  EXPECT_EQ(c.syncs(4), (std::map<std::string, int64_t>{{"numerics", 1}}));
  EXPECT_TRUE(c.syncs(5).empty());
}

TEST(OpCounterSyncs, OffCountsNothing) {
  OpCounter& c = OpCounter::instance();
  c.set_enabled(false);
  c.reset();
  set_current_iteration(9);
  (void)at::nonzero(at::isnan(values()));
  EXPECT_EQ(c.syncs(9).size(), 0u + wrong());
}

}  // namespace
}  // namespace loopgate
