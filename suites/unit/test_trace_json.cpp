// Unit tests for the Trace: exact hexfloat encoding of doubles (NaN payloads, -0.0, denormals, infinities),
// a bit-exact JSON round trip through a file, equality that names the first differing field, and errors that
// name a missing or malformed field; the wire form ranks send each other round-trips the same bits.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "suites/unit/wrong.h"
#include "trainer/common/error.h"
#include "trainer/loop/trace.h"

namespace loopgate {
namespace {

double from_bits(uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

TEST(TraceHex, KnownEncodings) {
  EXPECT_EQ(hex(1.5), wrong() ? "0x1.8p+1" : "0x1.8p+0");
  EXPECT_EQ(hex(-0.0), "-0x0p+0");
  EXPECT_EQ(hex(0.0), "0x0p+0");
  EXPECT_EQ(hex(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(hex(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(hex(from_bits(0x7ff8000000000000ull)), "nan(0x7ff8000000000000)");
  EXPECT_EQ(hex(std::numeric_limits<double>::denorm_min()), "0x0.0000000000001p-1022");
  EXPECT_EQ(double_bits(from_hex("0x1p-1074")), 1u);
  EXPECT_EQ(from_hex("0x1.4p+3"), 10.0);
}

TEST(TraceHex, RoundTripsSpecialValuesBitExactly) {
  const uint64_t bits[] = {
      0x7ff8000000000000ull,  // quiet NaN
      0xfff8000000000001ull,  // negative NaN with a payload
      0x7ff0000000000123ull,  // signalling NaN payload
      0x8000000000000000ull,  // -0.0
      0x0000000000000001ull,  // smallest denormal
      0x000fffffffffffffull,  // largest denormal
      0x800fffffffffffffull,  // negative denormal
      0x7fefffffffffffffull,  // DBL_MAX
      0xfff0000000000000ull,  // -inf
      0x3fb999999999999aull,  // 0.1
  };
  for (uint64_t b : bits) {
    const double v = from_bits(b);
    EXPECT_EQ(double_bits(from_hex(hex(v))), b + static_cast<uint64_t>(wrong())) << hex(v);
  }
}

TEST(TraceHex, RejectsMalformedStrings) {
  for (const char* s : {"", "abc", "0x1.8p+0 ", "1.5x", "nan(0x12)", "nan(0x3ff0000000000000)"}) {
    if (wrong()) EXPECT_NO_THROW(from_hex(s)) << s;
    else EXPECT_THROW(from_hex(s), InputError) << "'" << s << "'";
  }
}

Trace sample_trace() {
  Trace t;
  t.arm = "syncfree";
  t.fixture = "tp2sp";
  t.world = 2;
  t.environment = {{"blas", "openblas"}, {"cpu_capability", "avx2"}, {"libtorch", "1.13.1"}};
  for (int rank = 0; rank < 2; ++rank) {
    IterationRecord r;
    r.iteration = 7;
    r.rank = rank;
    r.lm_loss = rank == 0 ? std::numeric_limits<double>::quiet_NaN() : 10.5;
    r.params_norm = 262.375;
    r.grad_norm = -0.0;
    r.num_zeros = std::numeric_limits<double>::denorm_min();
    r.learning_rate = 0.1;  // not a binary fraction: exact bits still survive
    r.loss_scale = std::numeric_limits<double>::infinity();
    r.skipped = rank == 0;
    r.nan = true;
    r.consumed_samples = 896;
    r.timer_intervals = {{"forward-backward", 6, 0.046875}, {"interval-time", 3, 1e-310}};
    r.reads_per_site = {{"batched_log_read", 1}, {"rerun_decision", 1}};
    r.fault_verdicts = {{7, VerdictPhase::kBeforeStep, "skip_step"}};
    r.schedule = rank == 0 ? "F0 F1 B0 F2 B1 B2" : "F0 B0 F1 B1 F2 B2";
    r.param_checksum_before = 0xfedcba9876543210ull;
    r.param_checksum_after = 0x0123456789abcdefull;
    r.exit_decision = rank == 1;
    t.records.push_back(r);
  }
  return t;
}

TEST(TraceJson, RoundTripsThroughAFileBitExactly) {
  const Trace t = sample_trace();
  const auto path = std::filesystem::temp_directory_path() / fmt::format("loopgate_trace_{}.json", ::getpid());
  write_trace(t, path.string());
  Trace back = read_trace(path.string());
  std::filesystem::remove(path);
  if (wrong()) back.records[1].num_zeros = 0.0;
  std::string why;
  EXPECT_TRUE(traces_equal(t, back, &why)) << why;
  const IterationRecord* r0 = back.find(7, 0);
  ASSERT_NE(r0, nullptr);
  EXPECT_TRUE(std::isnan(r0->lm_loss));
  EXPECT_EQ(double_bits(r0->grad_norm), 0x8000000000000000ull);
  EXPECT_EQ(double_bits(r0->num_zeros), 1u);
  EXPECT_EQ(r0->timer_intervals[1].seconds, 1e-310);
  EXPECT_EQ(r0->param_checksum_before, 0xfedcba9876543210ull);
  EXPECT_EQ(back.iterations(), std::vector<int64_t>{7});
  EXPECT_EQ(back.find(8, 0), nullptr);
}

TEST(TraceJson, StoresAReadableDecimalBesideTheHex) {
  const nlohmann::json j = to_json(sample_trace());
  const auto& rec = j.at("records").at(1);
  EXPECT_EQ(rec.at("lm_loss").at("hex"), "0x1.5p+3");
  EXPECT_EQ(rec.at("lm_loss").at("dec"), wrong() ? "10.6" : "10.5");
  EXPECT_EQ(rec.at("learning_rate").at("dec"), "0.10000000000000001");
  EXPECT_EQ(rec.at("fault_verdicts").at(0).at("phase"), "before_step");
  EXPECT_EQ(rec.at("param_checksum_after"), "0x0123456789abcdef");
  EXPECT_EQ(rec.at("reads_per_site").at("rerun_decision"), 1);
}

TEST(TraceJson, EqualityNamesTheFirstDifferingBit) {
  const Trace a = sample_trace();
  Trace b = a;
  b.records[1].lm_loss = std::nextafter(10.5, 11.0);
  std::string why;
  EXPECT_EQ(traces_equal(a, b, &why), static_cast<bool>(wrong()));
  EXPECT_NE(why.find("iteration 7 rank 1: lm_loss: 0x1.5p+3 vs 0x1.5000000000001p+3"), std::string::npos) << why;
  b = a;
  b.records[0].fault_verdicts[0].phase = VerdictPhase::kAfterStep;  // detected too late
  EXPECT_FALSE(traces_equal(a, b, &why));
  EXPECT_NE(why.find("fault_verdicts"), std::string::npos) << why;
}

// The executed pipeline schedule: stored as written, compared, and absent in Traces written before it existed.
TEST(TraceJson, ScheduleRoundTripsAndIsOptional) {
  const Trace t = sample_trace();
  nlohmann::json j = to_json(t);
  EXPECT_EQ(j.at("records").at(0).at("schedule"), wrong() ? "F0 B0 F1 B1 F2 B2" : "F0 F1 B0 F2 B1 B2");
  EXPECT_EQ(trace_from_json(j).records[1].schedule, "F0 B0 F1 B1 F2 B2");
  Trace b = t;
  b.records[0].schedule = "F0 B0 F1 F2 B1 B2";
  std::string why;
  EXPECT_FALSE(traces_equal(t, b, &why));
  EXPECT_NE(why.find("schedule: 'F0 F1 B0 F2 B1 B2' vs 'F0 B0 F1 F2 B1 B2'"), std::string::npos) << why;
  for (auto& rec : j["records"]) rec.erase("schedule");  // an older Trace
  const Trace old = trace_from_json(j);
  EXPECT_TRUE(old.records[0].schedule.empty());
  IterationRecord none;
  EXPECT_FALSE(to_json(none).contains("schedule"));  // nothing written when nothing was recorded
}

TEST(TraceJson, MalformedInputNamesTheField) {
  nlohmann::json j = to_json(sample_trace());
  j["records"][0].erase("grad_norm");
  std::string what;
  try {
    trace_from_json(j);
  } catch (const InputError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find(wrong() ? "params_norm" : "grad_norm"), std::string::npos) << what;
  j = to_json(sample_trace());
  j["records"][1]["lm_loss"]["hex"] = "0x1.5p+3junk";
  EXPECT_THROW(trace_from_json(j), InputError);
  j = to_json(sample_trace());
  j["format"] = "loopgate-trace/0";
  EXPECT_THROW(trace_from_json(j), InputError);
  EXPECT_THROW(trace_from_string("{not json"), InputError);
  // The nested members (read in place, not copied) name themselves too.
  for (const char* key : {"timer_intervals", "reads_per_site", "fault_verdicts"}) {
    j = to_json(sample_trace());
    j["records"][0].erase(key);
    what.clear();
    try {
      trace_from_json(j);
    } catch (const InputError& e) {
      what = e.what();
    }
    EXPECT_NE(what.find(wrong() ? "lm_loss" : key), std::string::npos) << key << ": " << what;
  }
  j = to_json(sample_trace());
  j.erase("records");
  EXPECT_THROW(trace_from_json(j), InputError);
}

// The wire form (the gate's Trace gather): the same bits as the file form, each double a MessagePack float64.
TEST(TraceWire, RoundTripsBitExactly) {
  Trace t = sample_trace();
  t.records[0].params_norm = from_bits(0x7ff4000000000123ull);  // a NaN with a payload, signalling bit clear
  t.records[1].collectives = {{"dp#0", "all_reduce.sum", "Float", 16576, -1, 16, "numerics"},
                              {"pp#0", "send", "Float", 2048, 4, 3, "numerics"}};
  t.records[1].collective_groups = {"world#0", "dp#0"};
  t.records[1].coord = "tp 0, pp 0, dp 1";
  t.iterations_past_fault = 2;
  const std::vector<uint8_t> bytes = trace_to_wire(t);
  Trace back = trace_from_wire(bytes.data(), bytes.size());
  if (wrong()) back.records[0].timer_intervals[1].seconds = 0.0;
  std::string why;
  EXPECT_TRUE(traces_equal(t, back, &why)) << why;
  EXPECT_EQ(double_bits(back.records[0].params_norm), wrong() ? 0x7ff8000000000000ull : 0x7ff4000000000123ull);
  EXPECT_EQ(double_bits(back.records[0].grad_norm), 0x8000000000000000ull);
  EXPECT_EQ(back.records[0].param_checksum_before, 0xfedcba9876543210ull);
  EXPECT_EQ(back.iterations_past_fault, 2);
}

TEST(TraceWire, HoldsDoublesAsFloat64NotText) {
  const std::vector<uint8_t> bytes = trace_to_wire(sample_trace());
  const nlohmann::json j = nlohmann::json::from_msgpack(bytes);
  EXPECT_EQ(j.at("records").at(1).at("lm_loss").is_number_float(), !wrong());
  EXPECT_TRUE(j.at("records").at(1).at("param_checksum_after").is_number_unsigned());
  EXPECT_LT(bytes.size(), nlohmann::json::to_msgpack(to_json(sample_trace())).size());
}

TEST(TraceWire, MalformedBytesNameTheProblem) {
  std::vector<uint8_t> bytes = trace_to_wire(sample_trace());
  bytes.resize(bytes.size() / 2);
  EXPECT_THROW(trace_from_wire(bytes.data(), bytes.size()), InputError);
  // The file form's MessagePack is not the wire form: the first double says which field it is.
  const std::vector<uint8_t> file_form = nlohmann::json::to_msgpack(to_json(sample_trace()));
  std::string what;
  try {
    trace_from_wire(file_form.data(), file_form.size());
  } catch (const InputError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find(wrong() ? "grad_norm" : "lm_loss"), std::string::npos) << what;
}

}  // namespace
}  // namespace loopgate
