// Unit tests for the fault injector: spec parsing (good specs, and one InputError per bad field naming it),
// and in-place poisoning that fires only where the spec matches.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "fixtures/faults/fault.h"
#include "suites/unit/wrong.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

TEST(FaultSpec, ParsesALossFault) {
  const FaultSpec s = parse_fault_spec("iter=3,mb=0,rank=1,site=loss,kind=nan");
  EXPECT_EQ(s.iteration, 3 + wrong());
  EXPECT_EQ(s.microbatch, 0);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.site, FaultSpec::Site::kLoss);
  EXPECT_EQ(s.bucket, -1);
  EXPECT_EQ(s.kind, FaultSpec::Kind::kNaN);
}

TEST(FaultSpec, ParsesAGradBucketFaultAndDefaults) {
  const FaultSpec g = parse_fault_spec("iter=5, site=grad, bucket=2, kind=inf");
  EXPECT_EQ(g.iteration, 5);
  EXPECT_EQ(g.site, FaultSpec::Site::kGradBucket);
  EXPECT_EQ(g.bucket, 2 + wrong());
  EXPECT_EQ(g.kind, FaultSpec::Kind::kInf);
  EXPECT_EQ(g.rank, -1);
  const FaultSpec d = parse_fault_spec("site=loss,iter=0");
  EXPECT_EQ(d.microbatch, -1);
  EXPECT_EQ(d.rank, -1);
  EXPECT_EQ(d.kind, FaultSpec::Kind::kNaN);
  EXPECT_EQ(parse_fault_spec("iter=1,site=loss,mb=any,rank=all").rank, -1);
}

TEST(FaultSpec, ToStringParsesBackAndSpecsSplitOnSemicolons) {
  const auto specs = parse_fault_specs("iter=3,mb=0,rank=1,site=loss,kind=nan; iter=5,site=grad,bucket=2,kind=inf;");
  ASSERT_EQ(specs.size(), 2u + wrong());
  EXPECT_EQ(to_string(specs[0]), "iter=3,site=loss,mb=0,rank=1,kind=nan");
  EXPECT_EQ(to_string(specs[1]), "iter=5,site=grad,bucket=2,kind=inf");
  const FaultSpec back = parse_fault_spec(to_string(specs[1]));
  EXPECT_EQ(back.bucket, 2);
  EXPECT_EQ(back.kind, FaultSpec::Kind::kInf);
  EXPECT_TRUE(parse_fault_specs("").empty());
}

TEST(FaultSpec, EachBadFieldIsNamedInOneLine) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"iter=x,site=loss", "field 'iter': 'x' is not an integer"},
      {"iter=-2,site=loss", "field 'iter': -2 is out of range"},
      {"iter=3,site=loss,mb=one", "field 'mb': 'one' is not an integer"},
      {"iter=3,site=loss,rank=1.5", "field 'rank': '1.5' is not an integer"},
      {"iter=3,site=grad,bucket=", "field 'bucket': '' is not an integer"},
      {"iter=3,site=weights", "field 'site': 'weights' is not loss|grad"},
      {"iter=3,site=loss,kind=zero", "field 'kind': 'zero' is not nan|inf"},
      {"iter=3,site=loss,bucket=1", "field 'bucket' applies only to site=grad"},
      {"iter=3,site=grad,mb=0", "field 'mb' applies only to site=loss"},
      {"site=loss", "field 'iter' is missing"},
      {"iter=3", "field 'site' is missing"},
      {"iter=3,site=loss,when=now", "field 'when' is unknown"},
      {"iter=3,site=loss,iter=4", "field 'iter' given twice"},
      {"iter=3,site", "field 'site' has no '='"},
      {"iter=3,,site=loss", "empty field"},
  };
  for (const auto& [text, want] : bad) {
    std::string what;
    try {
      parse_fault_spec(text);
    } catch (const InputError& e) {
      what = e.what();
    }
    ASSERT_FALSE(what.empty()) << "no InputError for '" << text << "'";
    const std::string expect = want + (wrong() ? "!" : "");
    EXPECT_NE(what.find(expect), std::string::npos) << "for '" << text << "' got: " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(FaultInjector, PoisonsTheMatchingLossOnly) {
  FaultInjector inj(parse_fault_specs("iter=3,mb=0,rank=1,site=loss,kind=nan"));
  at::Tensor loss = at::full({2}, 1.5, at::kFloat);
  EXPECT_FALSE(inj.maybe_poison_loss(3, 0, 0, loss));  // other rank
  EXPECT_FALSE(inj.maybe_poison_loss(3, 1, 1, loss));  // other microbatch
  EXPECT_FALSE(inj.maybe_poison_loss(2, 0, 1, loss));  // other iteration
  at::Tensor grads = at::ones({4});
  EXPECT_FALSE(inj.maybe_poison_bucket(3, 0, 1, grads));  // other site
  EXPECT_TRUE(inj.fired().empty());
  EXPECT_TRUE(inj.maybe_poison_loss(3, 0, 1, loss));
  EXPECT_TRUE(std::isnan(loss.data_ptr<float>()[0]));
  EXPECT_EQ(loss.data_ptr<float>()[1], 1.5f + wrong());
  ASSERT_EQ(inj.fired().size(), 1u);
  EXPECT_EQ(inj.fired()[0].iteration, 3);
  EXPECT_EQ(inj.fired()[0].microbatch, 0);
  EXPECT_EQ(inj.fired()[0].rank, 1);
  EXPECT_TRUE(inj.fired_at(3));
  EXPECT_FALSE(inj.fired_at(2));
}

TEST(FaultInjector, PoisonsAGradBucketInPlaceWhateverItsStrides) {
  FaultInjector inj(parse_fault_specs("iter=5,site=grad,bucket=2,kind=inf"));
  at::Tensor storage = at::zeros({3, 2});
  at::Tensor view = storage.t();  // non-contiguous [2, 3] view of the bucket
  EXPECT_FALSE(inj.maybe_poison_bucket(5, 1, 0, view));
  EXPECT_TRUE(inj.maybe_poison_bucket(5, 2, 7, view));  // any rank
  const float* p = storage.data_ptr<float>();
  EXPECT_TRUE(std::isinf(p[0]) && p[0] > 0);
  for (int i = 1; i < 6; ++i) EXPECT_EQ(p[i], 0.0f) << i;
  EXPECT_EQ(inj.fired().size(), 1u + wrong());
  EXPECT_EQ(inj.fired()[0].bucket, 2);
  EXPECT_EQ(inj.fired()[0].microbatch, -1);
  // A 0-dim loss works too, and poisoning does not touch autograd state.
  FaultInjector any(parse_fault_specs("iter=1,site=loss"));
  at::Tensor scalar = at::full({}, 2.0);
  EXPECT_TRUE(any.maybe_poison_loss(1, 9, 4, scalar));
  EXPECT_TRUE(std::isnan(scalar.data_ptr<float>()[0]));
}

}  // namespace
}  // namespace loopgate
