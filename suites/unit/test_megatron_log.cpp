// Unit tests for the Megatron log reader (tools/analysis/megatron_log.h): both line layouts (with and without the
// timestamp), missing and unknown fields, noise, rank prefixes, every malformed case with its file:line message,
// the three input kinds detected from content, Trace step times from interval-time windows, and "identical as
// printed" at the coarser printed precision.
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <gtest/gtest.h>
#include <unistd.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "suites/unit/wrong.h"
#include "tools/analysis/megatron_log.h"
#include "trainer/common/error.h"

namespace loopgate {
namespace {

double shifted(double x) { return wrong() ? x + 1 : x; }
std::string shifted(const std::string& s) { return wrong() ? s + "!" : s; }

// Megatron HEAD's line (format_log_line + the .ffffff stamp), with a given prefix before it.
const char* const kHeadLine =
    " [2025-05-27 10:39:44.250000] iteration        2/      30 | consumed samples:           64 | elapsed time per "
    "iteration (ms): 612.4 | throughput per GPU (TFLOP/s/GPU): 92.5 | learning rate: 3.000000E-05 | global batch "
    "size:    32 | lm loss: 1.092335E+01 | loss scale: 1.0 | grad norm: 11.932 | num zeros: 1834.0 | params norm: "
    "262.145 | number of skipped iterations:   0 | number of nan iterations:   0 |";
// No timestamp, no params norm / num zeros / grad norm / lm loss (all optional in Megatron), an unknown loss key.
const char* const kBareLine =
    " iteration        5/      30 | consumed samples:          160 | skipped samples:            3 | elapsed time "
    "per iteration (ms): 600.1 | learning rate: 7.500000E-05 | global batch size:    32 | mtp_1 loss: "
    "2.500000E+00 | loss scale: 4096.0 | number of skipped iterations:   1 | number of nan iterations:   1 |";

std::string message_of(const std::string& text) {
  try {
    parse_megatron_log(text, "run.log");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string temp_file(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / fmt::format("loopgate_mlog_{}_{}", ::getpid(), name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(MegatronLog, HeadLayoutWithTimestamp) {
  RunLog log = parse_megatron_log(std::string("NCCL INFO boot\n") + kHeadLine + "\n", "run.log");
  ASSERT_EQ(log.entries.size(), 1u);
  const RunEntry& e = log.entries[0];
  EXPECT_EQ(e.iteration, 2 + wrong());
  EXPECT_EQ(e.train_iters, 30);
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.lm_loss->text, shifted("1.092335E+01"));
  EXPECT_DOUBLE_EQ(e.lm_loss->value, shifted(10.92335));
  EXPECT_FALSE(e.lm_loss->exact);
  EXPECT_EQ(e.params_norm->text, "262.145");
  EXPECT_EQ(e.grad_norm->text, "11.932");
  EXPECT_DOUBLE_EQ(e.num_zeros->value, shifted(1834));
  EXPECT_EQ(e.learning_rate->text, "3.000000E-05");
  EXPECT_EQ(e.loss_scale->text, "1.0");
  EXPECT_DOUBLE_EQ(*e.elapsed_ms, shifted(612.4));
  EXPECT_EQ(*e.skipped_iterations, 0);
  EXPECT_EQ(*e.nan_iterations, 0);
  EXPECT_EQ(e.timestamp_text, "2025-05-27 10:39:44.250000");
  EXPECT_EQ(e.other.at("throughput per GPU (TFLOP/s/GPU)"), "92.5");
  EXPECT_EQ(e.other.at("consumed samples"), shifted("64"));
  EXPECT_EQ(log.where(e), shifted("run.log:2"));
}

TEST(MegatronLog, BareLayoutAndMissingFields) {
  RunLog log = parse_megatron_log(kBareLine, "run.log");
  ASSERT_EQ(log.entries.size(), 1u);
  const RunEntry& e = log.entries[0];
  EXPECT_EQ(e.iteration, 5 + wrong());
  EXPECT_FALSE(e.timestamp.has_value() != static_cast<bool>(wrong()));
  EXPECT_FALSE(e.lm_loss || e.params_norm || e.grad_norm || e.num_zeros);
  EXPECT_EQ(e.other.at("mtp_1 loss"), shifted("2.500000E+00"));
  EXPECT_EQ(e.other.at("skipped samples"), "3");
  EXPECT_EQ(*e.skipped_iterations, 1 + wrong());
  EXPECT_EQ(*e.nan_iterations, 1);
  EXPECT_DOUBLE_EQ(e.loss_scale->value, shifted(4096));
}

TEST(MegatronLog, TimestampsToSeconds) {
  auto stamp = [](const std::string& t) {
    return *parse_megatron_log(" [" + t + "] iteration 1/ 2 | lm loss: 1.0 |", "s.log").entries[0].timestamp;
  };
  EXPECT_DOUBLE_EQ(stamp("1970-01-01 00:00:00"), shifted(0));
  EXPECT_DOUBLE_EQ(stamp("2000-01-01 00:00:00"), shifted(946684800));
  EXPECT_DOUBLE_EQ(stamp("2026-01-01 00:00:00.250000") - stamp("2025-12-31 23:59:59.750000"), shifted(0.5));
  EXPECT_DOUBLE_EQ(stamp("2024-03-01 00:00:00") - stamp("2024-02-28 00:00:00"), shifted(2 * 86400));  // leap day
}

TEST(MegatronLog, NoiseIsSkippedAndRankPrefixesAccepted) {
  std::string text = std::string() +
      "NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7\n"
      "WARNING: iteration 12 took longer than expected\n"
      "iteration time is dominated by the optimizer\n"
      "[Rank 0] (after 1 iterations) memory (MB) | allocated: 1234.5 | max allocated: 2345.6 |\n"
      "(min, max) time across ranks (ms):\n"
      "    forward-backward ...............................: (601.12, 601.45)\n"
      "[after training is done] datetime: 2025-05-27 10:45:00\n"
      "[rank7]: " + kHeadLine + "\n"
      "[default7]: iteration        3/      30 | lm loss: 1.0 |\n"
      "[1,7]<stdout>: iteration        4/      30 | lm loss: 1.0 |\n"
      "7: " + kBareLine + "\n"
      "7: [rank7]: iteration        6/      30 | lm loss: 1.0 |\n";
  RunLog log = parse_megatron_log(text, "noisy.log");
  std::vector<int64_t> its;
  for (const RunEntry& e : log.entries) its.push_back(e.iteration);
  std::vector<int64_t> want = {2, 3, 4, 5, 6};
  if (wrong()) want.push_back(7);
  EXPECT_EQ(its, want);
  EXPECT_EQ(log.entries[0].line, 8 + wrong());
}

// The arguments block: what `loopgate run` prints reads back; Megatron's own layout (a name of 48+ characters has
// no dots, rank prefixes, another rank's line inside the block) reads; no block is unset; no end line is refused.
TEST(MegatronLog, ArgumentsBlock) {
  const std::map<std::string, std::string> args = {{"lr", "0.001"}, {"micro_batch_size", "4"}, {"save", "None"}};
  const auto back = read_arguments_block(format_arguments_block(args) + kHeadLine, "run.log");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, args);
  const std::string megatron = std::string("[rank0]: ------------------------ arguments ------------------------\n") +
                               "[rank0]:   adam_beta1 ...................................... 0.9\n" +
                               "[rank3]: UserWarning: something else\n" +
                               "[rank0]:   a_name_of_exactly_fifty_characters_long_xxxxxxxxxx  " + shifted("True") + "\n" +
                               "[rank0]:   data_path ....................................... \n" +
                               "[rank0]: -------------------- end of arguments ---------------------\n";
  const auto m = read_arguments_block(megatron, "m.log");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->size(), 3u);
  EXPECT_EQ(m->at("adam_beta1"), "0.9");
  EXPECT_EQ(m->at("a_name_of_exactly_fifty_characters_long_xxxxxxxxxx"), "True");
  EXPECT_EQ(m->at("data_path"), "");
  EXPECT_FALSE(read_arguments_block(kHeadLine, "none.log").has_value());
  try {
    read_arguments_block("------------------------ arguments ------------------------\n  lr ... 1\n", "cut.log");
    ADD_FAILURE() << "an unterminated block was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.log:1: the arguments block has no 'end of arguments' line"),
              std::string::npos) << e.what();
  }
}

TEST(MegatronLog, MalformedIterationLinesNameFileAndLine) {
  const std::string ok = " iteration        1/      30 | lm loss: 1.0 |\n";
  struct Case {
    std::string line, message;
  };
  const std::vector<Case> cases = {
      {" iteration       1x/      30 | lm loss: 1.0 |", "run.log:2: unparsable iteration number '1x'"},
      {" iteration        2/        | lm loss: 1.0 |", "run.log:2: unparsable number of iterations ''"},
      {" iteration        2/      30  consumed samples: 64 |", "run.log:2: missing '|' after 'iteration 2/ 30'"},
      {" iteration        2/      30 | lm loss: 1.0 loss scale: 1.0 |", "run.log:2: field 'lm loss: 1.0 loss scale: "
                                                                           "1.0' holds two values (a missing '|'?)"},
      {" iteration        2/      30 | lm loss: 1.0 | loss sc", "run.log:2: the line does not end with '|'"},
      {" iteration        2/      30 | lm loss: 1.0.3 |", "run.log:2: field 'lm loss': unparsable number '1.0.3'"},
      {" iteration        2/      30 | consumed samples: 6x4 |", "run.log:2: field 'consumed samples': unparsable "
                                                                    "integer '6x4'"},
      {" iteration        2/      30 | number of nan iterations: 0.5 |", "run.log:2: field 'number of nan "
                                                                            "iterations': unparsable integer '0.5'"},
      {" iteration        2/      30 | lm loss 1.0 |", "run.log:2: field 'lm loss 1.0' has no ':'"},
      {" iteration        2/      30 | lm loss: 1.0 || grad norm: 2.0 |", "run.log:2: an empty field between"},
      {" iteration        2/      30 | lm loss: 1.0 | lm loss: 1.0 |", "run.log:2: field 'lm loss' appears twice"},
      {" [2025-13-27 10:39:44] iteration 2/ 30 | lm loss: 1.0 |", "run.log:2: bad timestamp '[2025-13-27 10:39:44]'"},
      {" [2025-02-29 10:39:44] iteration 2/ 30 | lm loss: 1.0 |", "run.log:2: bad timestamp '[2025-02-29 10:39:44]'"},
      {" [INFO] iteration 2/ 30 | lm loss: 1.0 |", "run.log:2: bad timestamp '[INFO]'"},
      {"INFO:megatron: iteration 2/ 30 | lm loss: 1.0 |", "run.log:2: an iteration line behind an unrecognised prefix "
                                                          "'INFO:megatron:'"},
      {" iteration        1/      30 | lm loss: 1.0 |", "run.log:2: iteration 1 is logged twice (first at line 1)"},
  };
  for (const Case& c : cases) {
    std::string got = message_of(ok + c.line + "\n");
    EXPECT_EQ(got.rfind(shifted(c.message), 0), 0u) << "line: " << c.line << "\n  got: " << got;
  }
  EXPECT_EQ(message_of("NCCL INFO only noise\n").rfind(shifted("run.log: no Megatron iteration line"), 0), 0u);
}

TEST(MegatronLog, ReadRunDetectsTheThreeKinds) {
  const std::string log_path = temp_file("a.log", std::string("noise\n") + kHeadLine + "\n");
  RunLog log = read_run(log_path);
  EXPECT_EQ(log.kind, wrong() ? RunKind::kTrace : RunKind::kMegatronLog);
  EXPECT_EQ(log.where(log.entries[0]), log_path + ":2");

  // Megatron's golden values (rounded, "as printed"), with a step not recorded ("nan", Megatron's placeholder).
  const std::string golden_path = temp_file("g.json", R"({"lm loss": {"start_step": 1, "end_step": 5,
    "step_interval": 5, "values": {"1": 10.92335, "5": "nan"}}, "iteration-time": {"start_step": 1, "end_step": 5,
    "step_interval": 5, "values": {"1": 4.80378, "5": 0.21906}}, "mem-allocated-bytes": {"start_step": 1,
    "end_step": 1, "step_interval": 1, "values": {"1": 487096832.0}}})");
  RunLog golden = read_run(golden_path);
  EXPECT_EQ(golden.kind, wrong() ? RunKind::kTrace : RunKind::kGoldenValues);
  ASSERT_EQ(golden.entries.size(), 2u);
  EXPECT_EQ(golden.entries[0].lm_loss->text, shifted("10.92335"));
  EXPECT_EQ(golden.entries[1].lm_loss.has_value(), wrong() != 0);  // not recorded: absent, not a NaN loss
  EXPECT_DOUBLE_EQ(*golden.entries[1].elapsed_ms, shifted(219.06));
  EXPECT_EQ(golden.entries[0].other.at("mem-allocated-bytes"), "487096832.0");
  EXPECT_EQ(golden.where(golden.entries[1]), golden_path + " iteration 5");

  // loopgate's golden layout: values_hex makes the values exact.
  RunLog exact = read_run(temp_file("gx.json", R"({"params-norm": {"values": {"1": 25.16718},
    "values_hex": {"1": "0x1.92acc67e4dcf9p+4"}}})"));
  EXPECT_TRUE(exact.entries[0].params_norm->exact != static_cast<bool>(wrong()));
  EXPECT_EQ(exact.entries[0].params_norm->text, "0x1.92acc67e4dcf9p+4");

  // A Trace: the last rank's records.
  Trace t;
  t.world = 2;
  for (int rank = 0; rank < 2; ++rank) {
    IterationRecord r;
    r.iteration = 1;
    r.rank = rank;
    r.lm_loss = rank == 1 ? 5.5 : 0.0;
    r.timer_intervals = {{"interval-time", 0, 0.5}};
    t.records.push_back(r);
  }
  const std::string trace_path = temp_file("t.json", trace_to_string(t));
  RunLog tr = read_run(trace_path);
  EXPECT_EQ(tr.kind, wrong() ? RunKind::kMegatronLog : RunKind::kTrace);
  EXPECT_EQ(tr.last_rank, 1 + wrong());
  EXPECT_DOUBLE_EQ(tr.entries[0].lm_loss->value, shifted(5.5));
  EXPECT_EQ(tr.entries[0].lm_loss->text, "0x1.6p+2");

  auto error_of = [](const std::string& path) -> std::string {
    try {
      read_run(path);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string neither = temp_file("n.json", R"({"foo": 1, "bar": [2]})");
  EXPECT_EQ(error_of(neither).rfind(shifted(neither + ": JSON, but neither a loopgate Trace"), 0), 0u);
  const std::string text = temp_file("n.txt", "hello\nworld\n");
  EXPECT_EQ(error_of(text).rfind(shifted(text + ": no Megatron iteration line"), 0), 0u);
  EXPECT_EQ(error_of("/nonexistent/x.log").rfind(shifted("/nonexistent/x.log: cannot open"), 0), 0u);
  const std::string broken = temp_file("b.json", R"({"lm loss": )");
  EXPECT_EQ(error_of(broken).rfind(shifted(broken + ": starts like JSON but does not parse"), 0), 0u);
  for (const std::string& p : {log_path, golden_path, trace_path, neither, text, broken}) std::filesystem::remove(p);
}

TEST(MegatronLog, TraceStepTimesFromIntervalTimeWindows) {
  // Log points at 1, 2, 4 (3 is not: no intervals). interval-time windows: seq 0 = 0.5 s (iteration 1),
  // seq 1 = 0.25 s (iteration 2, reported late, at 4), seq 2 = 1.0 s over iterations 3..4.
  Trace t;
  auto rec = [&](int64_t it, std::vector<TimerInterval> iv) {
    IterationRecord r;
    r.iteration = it;
    r.timer_intervals = std::move(iv);
    r.skipped = it == 3;
    t.records.push_back(r);
  };
  rec(1, {{"interval-time", 0, 0.5}});
  rec(2, {{"forward-backward", 1, 0.125}});
  rec(3, {});
  rec(4, {{"interval-time", 1, 0.25}, {"interval-time", 2, 1.0}});
  t.records[1].lm_loss = NAN;    // not logged (Megatron drops a NaN average)
  t.records[1].grad_norm = -1;   // a skipped step's grad norm: not logged
  RunLog log = trace_run(t, "t.json");
  EXPECT_FALSE(log.entries[1].lm_loss.has_value() || log.entries[1].grad_norm.has_value());
  EXPECT_TRUE(log.entries[1].learning_rate.has_value() != static_cast<bool>(wrong()));
  ASSERT_EQ(log.entries.size(), 4u);
  EXPECT_DOUBLE_EQ(*log.entries[0].elapsed_ms, shifted(500));
  EXPECT_DOUBLE_EQ(*log.entries[1].elapsed_ms, shifted(250));
  EXPECT_FALSE(log.entries[2].elapsed_ms.has_value() || log.entries[2].lm_loss.has_value());
  EXPECT_EQ(*log.entries[2].skipped_iterations, 1 + wrong());
  EXPECT_DOUBLE_EQ(*log.entries[3].elapsed_ms, shifted(500));
}

TEST(MegatronLog, SameAsPrintedAtTheCoarserPrecision) {
  auto printed = [](const std::string& t) { return LoggedValue{std::strtod(t.c_str(), nullptr), t, false}; };
  auto exact = [](double v) { return LoggedValue{v, hex(v), true}; };
  const bool w = wrong();
  EXPECT_EQ(same_logged_value(printed("1.092335E+01"), printed("1.092335E+01")), !w);
  EXPECT_EQ(same_logged_value(printed("1.092335E+01"), printed("1.092336E+01")), w);
  EXPECT_EQ(same_logged_value(printed("1.092335E+01"), printed("10.92335")), !w);   // golden vs log, same quantum
  EXPECT_EQ(same_logged_value(printed("10.9"), printed("1.092335E+01")), !w);       // at the coarser "10.9"
  EXPECT_EQ(same_logged_value(printed("11.0"), printed("1.092335E+01")), w);
  EXPECT_EQ(same_logged_value(exact(10.923354), printed("1.092335E+01")), !w);      // exact rendered like the log
  EXPECT_EQ(same_logged_value(exact(10.9233551), printed("1.092335E+01")), w);
  EXPECT_EQ(same_logged_value(exact(0.1), exact(0.1 + 1e-18)), !w);                 // the same double
  EXPECT_EQ(same_logged_value(exact(0.1), exact(std::nextafter(0.1, 1.0))), w);     // one ulp apart
  EXPECT_EQ(same_logged_value(printed("nan"), printed("NAN")), !w);
  EXPECT_EQ(same_logged_value(printed("nan"), printed("1.0")), w);
  EXPECT_EQ(format_like(3e-5, "1.000000E-07"), shifted("3.000000E-05"));
  EXPECT_EQ(format_like(1834.4, "0"), shifted("1834"));
  EXPECT_EQ(printed_format(printed("262.145")), shifted("%.3f"));
  EXPECT_EQ(printed_format(exact(1.0)), shifted("exact bits"));
}

}  // namespace
}  // namespace loopgate
