// Unit tests for the host-read ledger: site names, counts per site per iteration, values of any dtype, the
// watchdog's current site, checksums, and the source scan of every folder of trainer/ (with planted reads).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <set>

#include "fixtures/loop_checks.h"
#include "fixtures/source_scan.h"
#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/measure/ledger.h"

namespace loopgate {
namespace {

TEST(Ledger, SiteNamesAreStableAndParseBack) {
  std::set<std::string> names;
  for (Site s : all_sites()) {
    names.insert(site_name(s));
    EXPECT_EQ(parse_site(site_name(s)), s);
  }
  EXPECT_EQ(names.size(), 15u + wrong());
  EXPECT_STREQ(site_name(Site::kRerunDecision), "rerun_decision");
  EXPECT_STREQ(site_name(Site::kLossAccumSeed), "loss_accum_seed");
  EXPECT_STREQ(site_name(Site::kBatchedLogRead), "batched_log_read");
  EXPECT_STREQ(site_name(Site::kOnesyncRead), "onesync_read");
  EXPECT_THROW(parse_site("grad-norm"), InputError);
  EXPECT_FALSE(try_parse_site("nan_check").has_value());
}

TEST(Ledger, CountsPerSitePerIteration) {
  Ledger ledger;
  const at::Tensor t = at::ones({3});
  ledger.begin_iteration(1);
  ledger.read(Site::kGradNorm, t);
  ledger.read(Site::kGradNorm, t);
  ledger.device_scalar(Site::kLossAccumSeed, 0.0, at::TensorOptions().dtype(at::kFloat));
  ledger.begin_iteration(2);
  for (int mb = 0; mb < 3; ++mb) ledger.read(Site::kNanCheckLoss, t);
  ledger.record_sync(Site::kTimers);

  const std::map<Site, int64_t> it1 = {{Site::kGradNorm, 2 + wrong()}, {Site::kLossAccumSeed, 1}};
  const std::map<Site, int64_t> it2 = {{Site::kNanCheckLoss, 3}, {Site::kTimers, 1}};
  EXPECT_EQ(ledger.counts(1), it1);
  EXPECT_EQ(ledger.counts(2), it2);
  EXPECT_TRUE(ledger.counts(7).empty());
  EXPECT_EQ(ledger.count(2, Site::kNanCheckLoss), 3);
  EXPECT_EQ(ledger.count(2, Site::kGradNorm), 0);
  EXPECT_EQ(ledger.total(), 7);
  EXPECT_EQ(ledger.total(Site::kGradNorm), 2);
  const std::map<std::string, int64_t> names2 = {{"nan_check_loss", 3}, {"timers", 1}};
  EXPECT_EQ(ledger.counts_by_name(2), names2);

  // Every read in order, with its iteration.
  ASSERT_EQ(ledger.records().size(), 7u);
  EXPECT_EQ(ledger.records()[0].iteration, 1);
  EXPECT_EQ(ledger.records()[2].site, Site::kLossAccumSeed);
  EXPECT_EQ(ledger.records()[2].kind, ReadRecord::Kind::kDeviceScalar);
  EXPECT_EQ(ledger.records()[3].numel, 3);
  EXPECT_EQ(ledger.records()[6].kind, ReadRecord::Kind::kSync);
}

TEST(Ledger, ReadReturnsValuesOfAnyDtypeAndShape) {
  Ledger ledger;
  at::Tensor b = at::zeros({2}, at::kBool);
  b[0].fill_(true);
  EXPECT_EQ(ledger.read(Site::kNanCheckGrad, b), (std::vector<double>{1.0 + wrong(), 0.0}));
  const at::Tensor i = at::arange(6, at::kLong).reshape({2, 3}).t();  // non-contiguous [3, 2]
  EXPECT_EQ(ledger.read(Site::kNumZeros, i), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  const at::Tensor f = at::full({}, 0.375, at::kFloat);  // 0-dim
  EXPECT_EQ(ledger.read(Site::kGradNorm, f), (std::vector<double>{0.375}));
  const at::Tensor h = at::full({1}, -2.5, at::kBFloat16);
  EXPECT_EQ(ledger.read(Site::kLossScale, h), (std::vector<double>{-2.5}));
}

TEST(Ledger, DeviceScalarBuildsTheValueAndCountsOne) {
  Ledger ledger;
  ledger.begin_iteration(4);
  const at::Tensor s = ledger.device_scalar(Site::kLearningRate, 0.25, at::TensorOptions().dtype(at::kFloat));
  EXPECT_EQ(s.scalar_type(), at::kFloat);
  EXPECT_EQ(s.sizes().vec(), std::vector<int64_t>{1});
  EXPECT_EQ(s.data_ptr<float>()[0], 0.25f + wrong());
  const at::Tensor v = ledger.device_tensor(Site::kTimers, {1.5, 2.0}, at::TensorOptions().dtype(at::kDouble));
  EXPECT_EQ(v.data_ptr<double>()[1], 2.0);
  const at::Tensor n = ledger.device_scalar(Site::kRerunDecision, 1.0, at::TensorOptions().dtype(at::kInt));
  EXPECT_EQ(n.scalar_type(), at::kInt);
  EXPECT_EQ(ledger.count(4, Site::kLearningRate), 1);
  EXPECT_EQ(ledger.total(), 3);
}

TEST(Ledger, NamesTheCurrentSiteForTheWatchdog) {
  Ledger ledger;
  ledger.read(Site::kExitVote, at::zeros({1}));
  EXPECT_STREQ(current_site(), wrong() ? "timers" : "exit_vote");
  ledger.device_scalar(Site::kLossAccumSeed, 0.0, {});
  EXPECT_STREQ(current_site(), "loss_accum_seed");
}

// The CUPTI counter's profile mode timestamps iteration boundaries through this observer (docs/profile.md).
std::vector<long long>& observed_iterations() {
  static std::vector<long long> seen;
  return seen;
}

TEST(Ledger, BeginIterationCallsTheIterationObserver) {
  observed_iterations().clear();
  set_iteration_observer([](long long iteration) { observed_iterations().push_back(iteration); });
  Ledger ledger;
  ledger.begin_iteration(4);
  ledger.begin_iteration(5);
  set_current_iteration(-1);
  set_iteration_observer(nullptr);
  ledger.begin_iteration(6);  // no observer: nothing seen
  set_current_iteration(0);
  EXPECT_EQ(observed_iterations(), (std::vector<long long>{4, 5, -1 + wrong()}));
  EXPECT_EQ(current_iteration(), 0);
}

// A trailing log read lands while the next iteration runs: it counts at its own iteration, tells the observer (the
// profile's windows) nothing, and the iteration in progress comes back after it.
TEST(Ledger, CountAsCountsAtTheGivenIterationAndRestores) {
  observed_iterations().clear();
  set_iteration_observer([](long long iteration) { observed_iterations().push_back(iteration); });
  Ledger ledger;
  ledger.begin_iteration(8);
  {
    Ledger::CountAs own(ledger, 7);
    EXPECT_EQ(current_iteration(), 7 + wrong());
    ledger.record_read(Site::kBatchedLogRead, 3);
  }
  ledger.record_read(Site::kNanCheckLoss, 1);
  set_iteration_observer(nullptr);
  EXPECT_EQ(ledger.iteration(), 8);
  EXPECT_EQ(current_iteration(), 8);
  EXPECT_EQ(ledger.count(7, Site::kBatchedLogRead), 1 + wrong());
  EXPECT_EQ(ledger.count(8, Site::kBatchedLogRead), 0);
  EXPECT_EQ(ledger.count(8, Site::kNanCheckLoss), 1);
  EXPECT_EQ(observed_iterations(), (std::vector<long long>{8}));
  set_current_iteration(0);
}

TEST(Ledger, ResetForgetsEverything) {
  Ledger ledger;
  ledger.begin_iteration(3);
  ledger.read(Site::kParamsNorm, at::zeros({1}));
  ledger.reset();
  EXPECT_EQ(ledger.total(), 0 + wrong());
  EXPECT_TRUE(ledger.records().empty());
  EXPECT_TRUE(ledger.counts(3).empty());
  EXPECT_EQ(ledger.iteration(), 0);
}

TEST(Ledger, ChecksumIsStableSeesOneBitAndIsNotACountedRead) {
  Ledger ledger;
  const at::Tensor a = at::arange(8, at::kFloat);
  at::Tensor b = a.clone();
  const uint64_t ha = ledger.checksum({a});
  EXPECT_EQ(ha, ledger.checksum({b}));
  // Flip the lowest mantissa bit of element 3.
  reinterpret_cast<uint32_t*>(b.data_ptr<float>())[3] ^= 1u;
  EXPECT_NE(ha, ledger.checksum({b}));
  EXPECT_NE(tensor_checksum({a}), tensor_checksum({a.reshape({2, 4})}));  // shape is part of it
  EXPECT_EQ(ledger.diagnostic_reads(), 3 + wrong());
  EXPECT_EQ(ledger.total(), 0);
}

// The checksum's definition, FNV-1a over 8-byte words then the tail bytes, tensor by tensor: dtype, sizes, then the
// bytes in row-major order. CPU tensors are hashed in place, device tensors through one copy per dtype; both must
// give this known answer (non-contiguous views, offsets into a storage, dtypes interleaved), worked out apart from
// LibTorch, by Python's struct over the same values.
TEST(Ledger, ChecksumHashesViewsAndMixedDtypesByTheirBytesInOrder) {
  const at::Tensor m = at::arange(35, at::kFloat).reshape({5, 7});
  const std::vector<at::Tensor> tensors = {m.t(),                             // not contiguous
                                           at::arange(5, at::kLong),          // another dtype between floats
                                           m.narrow(0, 2, 3),                 // an offset into a storage
                                           m.to(at::kBFloat16).narrow(1, 1, 3),  // 6-byte rows, a tail
                                           at::ones({0})};                    // empty
  EXPECT_EQ(tensor_checksum(tensors), 0x83174116edd51a14ull + wrong());
  EXPECT_NE(tensor_checksum(tensors), tensor_checksum({tensors[1], tensors[0], tensors[2], tensors[3], tensors[4]}));
}

// ---- the source scan (the same checks the loop_code gate runs: fixtures/loop_checks.h) ----

TEST(LedgerSourceScan, EveryFolderOfTrainerReadsOnlyThroughTheLedger) {
  const TrainerScan scan = scan_trainer_for_host_reads(trainer_source_dir());
  const auto p = scan_problems(scan);
  std::string list;
  for (const std::string& x : p) list += "\n  " + x;
  EXPECT_EQ(p.size(), 0u + wrong()) << "direct device reads outside the ledger:" << list;
  // Every folder of trainer/ was scanned, whatever its name: the nine of today at least.
  for (const char* folder : {"common", "parallel", "model", "measure", "capture", "timers", "optim", "pipeline", "loop"})
    EXPECT_GT(scan.folders.count(folder), 0u) << folder << " not scanned: " << scan_summary(scan);
  EXPECT_GE(scan.files, 60) << scan_summary(scan);
  // The allowlist holds exact files with reasons; loop code is never on it.
  for (const HostReadAllowance& a : host_read_allowlist()) {
    EXPECT_FALSE(a.reason.empty()) << a.file;
    EXPECT_FALSE(a.patterns.empty()) << a.file;
    for (const char* loop : {"loop/", "optim/", "pipeline/", "model/"}) EXPECT_NE(a.file.rfind(loop, 0), 0u) << a.file;
  }
}

TEST(LedgerSourceScan, FindsEveryPlantedReadInACopyOfTheTree) {
  std::string summary;
  const auto p = planted_scan_problems(trainer_source_dir(), &summary);
  std::string list;
  for (const std::string& x : p) list += "\n  " + x;
  EXPECT_EQ(p.size(), 0u + wrong()) << summary << list;
  // The planted copy is removed again (it once crashed in its removal on a GPU runner's toolchain and stayed).
  size_t left = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    left += e.path().filename().string().rfind("loopgate_planted_" + std::to_string(::getpid()) + "_", 0) == 0;
  EXPECT_EQ(left, 0u + wrong()) << "planted copies of the trainer left in " << std::filesystem::temp_directory_path();
}

TEST(LedgerSourceScan, IgnoresCommentsAndStringsAndNamesTheLine) {
  EXPECT_TRUE(scan_for_host_reads("loop/a.cpp", "x = 1;  // Megatron: found_inf.item()\n").empty());
  EXPECT_TRUE(scan_for_host_reads("loop/a.cpp", "/* t.cpu()\n   t.item() */ int y;\n").empty());
  EXPECT_TRUE(scan_for_host_reads("loop/a.cpp", "LG_CHECK(ok, \"call .item() or .cpu() later\");\n").empty());
  EXPECT_TRUE(scan_for_host_reads("loop/a.cpp", "const char* ops[] = {\"aten::_local_scalar_dense\"};\n").empty());
  const auto v = scan_for_host_reads("loop/a.cpp", "int a;\n/* two\nlines */ y = t.cpu(); // then .item()\n");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].line, 3 + wrong());
  EXPECT_EQ(v[0].pattern, "'.cpu()'");
  EXPECT_EQ(v[0].text, "lines */ y = t.cpu(); // then .item()");
  // A quote after a digit is a separator, not a literal that would swallow the read after it.
  EXPECT_EQ(scan_for_host_reads("loop/a.cpp", "int n = 1'000; auto h = t.cpu();\n").size(), 1u);
  EXPECT_EQ(scan_for_host_reads("loop/a.cpp", "auto s = R\"(t.item())\"; auto h = t.cpu();\n").size(), 1u);
}

TEST(LedgerSourceScan, AMissingOrEmptyTreeIsAViolationNotACleanScan) {
  EXPECT_EQ(scan_trainer_for_host_reads("/nonexistent/loopgate/trainer").violations.size(), 1u + wrong());
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / fmt::format("loopgate_empty_{}", ::getpid());
  fs::create_directories(tmp / "loop");
  std::ofstream(tmp / "loop" / "notes.md") << "x.item()\n";  // not a source file
  const TrainerScan scan = scan_trainer_for_host_reads(tmp.string());
  fs::remove_all(tmp);
  ASSERT_EQ(scan.violations.size(), 1u);
  EXPECT_EQ(scan.violations[0].pattern, "<no source files>");
  // Every allowlist entry is stale in an empty tree: an entry must name a file and spelling that really read.
  size_t spellings = 0;
  for (const HostReadAllowance& a : host_read_allowlist()) spellings += a.patterns.size();
  EXPECT_EQ(scan.stale.size(), spellings);
}

}  // namespace
}  // namespace loopgate
