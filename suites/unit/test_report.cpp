// Unit tests for `loopgate report` as a library: a synthetic gate JSON and hand-made Traces in a temp folder,
// rendered with render_report_file, and the page checked against what was written — every verdict row and cell,
// one SVG per chart with one series per arm holding the Trace's hexfloats, the steady-state host reads, every
// timer interval, a failure's first differing value in hexfloat, escaping, no external reference — plus the
// verdict cells themselves and the input errors. Not here: a real gate run (CTest report_e2e) or a browser
// (report_browser).
// Mutation check: LOOPGATE_WRONG_EXPECTATIONS=1 shifts every hand-computed expectation, so every test here fails.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "suites/unit/wrong.h"
#include "tools/loopgate/report.h"
#include "tools/loopgate/verdicts.h"
#include "trainer/common/error.h"
#include "trainer/loop/trace.h"

namespace loopgate {
namespace {

namespace fs = std::filesystem;

// ---- the synthetic gate run ----

const double kLr[] = {0x1.0624dep-11, 0x1.0624dep-10, 0x1.c72f92p-11, 0x1.205bcp-11};  // iterations 1..4
const double kDefectLr3 = 0x1.c72f94p-11;                                           // defect-x at iteration 3

// tp2sp: two ranks, iterations 1..4. lm loss lives on rank 1 (the last); rank 0 holds the reads. baseline
// reports each timer interval at the iteration it ends, syncfree one iteration late, defect-x like baseline but
// with a different LR at iteration 3.
Trace make_trace(const std::string& arm) {
  Trace t;
  t.arm = arm;
  t.fixture = "tp2sp";
  t.world = 2;
  t.environment = {{"blas", "openblas <serial>"}, {"torch_version", "1.13.0"}};
  for (int64_t it = 1; it <= 4; ++it) {
    for (int rank = 0; rank < 2; ++rank) {
      IterationRecord r;
      r.iteration = it;
      r.rank = rank;
      r.lm_loss = rank == 1 ? 5.5 - 0.25 * static_cast<double>(it) : 0.0;
      r.params_norm = 25.0 + static_cast<double>(it);
      r.grad_norm = 1.5 / static_cast<double>(it);
      r.learning_rate = arm == "defect-x" && it == 3 ? kDefectLr3 : kLr[it - 1];
      if (rank == 0) {
        if (it == 1) r.reads_per_site = {{"grad_norm", 9}};  // one-off reads: not in the steady state
        else if (arm == "syncfree") r.reads_per_site = {{"batched_log_read", 1}};
        else r.reads_per_site = {{"grad_norm", 3}, {"timers", 2}};
      }
      const bool late = arm == "syncfree";
      if (!late) r.timer_intervals = {{"forward-backward", it - 1, 0.01 * static_cast<double>(it)}};
      else if (it >= 2) r.timer_intervals = {{"forward-backward", it - 2, 0.01 * static_cast<double>(it - 1)}};
      t.records.push_back(r);
    }
  }
  return t;
}

const char* const kFailure =
    "suites/equivalence.cpp:38\nValue of: m.empty()\n1 difference(s)\n"
    "  iteration 3 rank 1 learning_rate: baseline 0x1.c72f92p-11 (0.000868198054) vs defect-x 0x1.c72f94p-11 "
    "(0.000868198113) <script>alert(1)</script>";

// The gate JSON (as `loopgate gate --json` writes it) and the Traces, in a fresh temp folder.
class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("loopgate_report_{}_{}", ::getpid(), counter_++);
    fs::create_directories(dir_ / "tp2sp");
    GateSummary g;
    g.ok = false;
    g.started_at = "2026-01-02T03:04:05Z";
    g.seconds = 12.5;
    g.arms = {"syncfree", "defect-x"};
    FixtureRun f{"tp2sp", 2, 1, 10.0, "/tmp/tp2sp.log", {}, {}};
    f.verdicts = {
        {"tp2sp", "equivalence", kAllArms, "Equivalence.Clean", true, ""},
        {"tp2sp", "equivalence", "syncfree", "Arms/Equivalence.Bits/syncfree", true, ""},
        {"tp2sp", "equivalence", "defect-x", "Arms/Equivalence.Bits/defect_x", false, kFailure},
        {"tp2sp", "equivalence", kPlantedDefect, "GatePower.EquivalenceRejects", true, ""},
        {"tp2sp", "sync_budget", "syncfree", "Arms/SyncBudget.Reads/syncfree", true, ""},
        {"tp2sp", "sync_budget", kPlantedDefect, "GatePower.SyncBudgetRejects", false, "gate lost its power"},
    };
    for (const std::string arm : {"baseline", "syncfree", "defect-x"}) {
      write_trace(make_trace(arm), (dir_ / "tp2sp" / ("clean__" + arm + ".json")).string());
      f.traces.push_back({"clean", arm, "tp2sp/clean__" + arm + ".json"});  // relative: to the gate JSON's folder
    }
    write_trace(make_trace("baseline"), (dir_ / "tp2sp" / "nan_loss__baseline.json").string());
    f.traces.push_back({"nan:loss", "baseline", (dir_ / "tp2sp" / "nan_loss__baseline.json").string()});
    FixtureRun single{"single", 1, 0, 3.0, "/tmp/single.log", {}, {}};
    single.verdicts = {{"single", "timers", kAllArms, "Timers.Fake", true, ""}};
    g.runs = {f, single};
    json_ = gate_to_json(g);
    write_json(json_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_json(const nlohmann::json& j) { std::ofstream(dir_ / "gate.json") << j.dump(1); }
  std::string render() { return render_report_file((dir_ / "gate.json").string(), "2026-01-02T04:00:00Z"); }

  fs::path dir_;
  nlohmann::json json_;
  static int counter_;
};
int ReportTest::counter_ = 0;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// The element that starts with `open` (up to its `close`), or "" when absent.
std::string element(const std::string& html, const std::string& open, const std::string& close) {
  const size_t a = html.find(open);
  if (a == std::string::npos) return "";
  const size_t b = html.find(close, a);
  return html.substr(a, b == std::string::npos ? std::string::npos : b + close.size() - a);
}

std::string row(const std::string& html, const std::string& fixture, const std::string& check) {
  return element(html, fmt::format("<tr class=\"verdict-row\" data-fixture=\"{}\" data-check=\"{}\">", fixture, check),
                 "</tr>");
}

std::string cell(const std::string& row_html, const std::string& arm) {
  std::smatch m;
  const std::regex re("<td class=\"[a-z]+\" data-arm=\"" + std::regex_replace(arm, std::regex(R"([()])"), R"(\$&)") +
                      "\">([^<]*)</td>");
  return std::regex_search(row_html, m, re) ? m[1].str() : "(absent)";
}

// ---- the table ----

TEST(VerdictRows, CellsCountOwnTestsPlusArmIndependentOnes) {
  FixtureRun r{"pp2", 2, 1, 1.0, "", {}, {}};
  r.verdicts = {{"pp2", "timers", kAllArms, "a", true, ""},      {"pp2", "timers", kAllArms, "b", false, "x"},
                {"pp2", "timers", "onesync", "c", true, ""},     {"pp2", "timers", kPlantedDefect, "d", true, ""},
                {"pp2", "other", kAllArms, "Crash.Test", false, "x"}};
  const std::vector<VerdictRow> rows = verdict_rows({r}, {"syncfree", "onesync"});
  ASSERT_EQ(rows.size(), 2u + wrong());
  EXPECT_EQ(rows[0].check, "timers");
  EXPECT_EQ(rows[0].baseline, wrong() ? "FAIL 1/3" : "FAIL 1/2");
  EXPECT_EQ(rows[0].cells, (std::vector<std::string>{"-", wrong() ? "FAIL 1/2" : "FAIL 1/3"}));
  EXPECT_EQ(rows[0].defect, wrong() ? "ACCEPTED!" : "REJECTED");
  EXPECT_EQ(rows[1].check, wrong() ? "timers" : "other");
}

TEST_F(ReportTest, EveryVerdictRowWithItsCells) {
  const std::string html = render();
  EXPECT_EQ(count(html, "<tr class=\"verdict-row\""), 3u + wrong());
  const std::string eq = row(html, "tp2sp", "equivalence");
  EXPECT_EQ(cell(eq, "baseline"), "PASS");
  EXPECT_EQ(cell(eq, "syncfree"), wrong() ? "FAIL 1/2" : "PASS");
  EXPECT_EQ(cell(eq, "defect-x"), wrong() ? "FAIL 1/3" : "FAIL 1/2");
  EXPECT_EQ(cell(eq, kPlantedDefect), "REJECTED");
  const std::string sb = row(html, "tp2sp", "sync_budget");
  EXPECT_EQ(cell(sb, "baseline"), wrong() ? "PASS" : "-");
  EXPECT_EQ(cell(sb, "syncfree"), "PASS");
  EXPECT_EQ(cell(sb, "defect-x"), "-");
  EXPECT_EQ(cell(sb, kPlantedDefect), wrong() ? "REJECTED" : "ACCEPTED!");
  EXPECT_EQ(cell(row(html, "single", "timers"), "baseline"), "PASS");
}

TEST_F(ReportTest, HeaderHasTotalsVerdictWhenAndEnvironment) {
  const std::string html = render();
  EXPECT_EQ(has(html, "data-total=\"7\" data-failed=\"2\">7 verdicts, 2 failed"), !wrong());
  EXPECT_TRUE(has(html, wrong() ? ">OK</span>" : "id=\"overall\">FAILED</span>"));
  EXPECT_EQ(has(html, "2026-01-02T03:04:05Z"), !wrong());
  EXPECT_EQ(has(html, "<th>blas</th><td>openblas &lt;serial&gt;</td>"), !wrong());
}

// ---- charts ----

TEST_F(ReportTest, OneSvgPerChartOneSeriesPerArmWithTheTracesValues) {
  const std::string html = render();
  EXPECT_EQ(count(html, "<svg "), 6u + wrong());  // tp2sp: 4 charts, reads, timeline; single has no Trace
  for (const char* field : {"lm_loss", "params_norm", "grad_norm", "learning_rate"}) {
    const std::string svg = element(html, fmt::format("data-field=\"{}\"", field), "</svg>");
    ASSERT_FALSE(svg.empty()) << field;
    EXPECT_EQ(count(svg, "<g class=\"series\""), 3u + wrong()) << field;
    EXPECT_EQ(count(svg, "<circle"), 12u + wrong()) << field;  // 3 arms x 4 iterations
  }
  const std::string lr = element(html, "data-field=\"learning_rate\"", "</svg>");
  const std::string defect = element(lr, "data-arm=\"defect-x\"", ">");
  EXPECT_TRUE(has(defect, wrong() ? "data-iterations=\"1 2 3\"" : "data-iterations=\"1 2 3 4\""));
  // data-values: the last rank's exact values, one hexfloat per iteration
  EXPECT_TRUE(has(defect, fmt::format("data-values=\"{} {} {} {}\"", hex(kLr[0]), hex(kLr[1]),
                                      hex(wrong() ? kLr[2] : kDefectLr3), hex(kLr[3])))) << defect;
  const std::string loss = element(html, "data-field=\"lm_loss\"", "</svg>");
  EXPECT_TRUE(has(loss, hex(5.5 - 0.25 * (4 + wrong()))));  // the last rank's loss at iteration 4
  EXPECT_EQ(has(html, "<b>learning rate</b>: identical bits (lines overlap): baseline, syncfree; own values: defect-x"),
            !wrong());
}

TEST_F(ReportTest, HostReadsAreRankZerosSteadyStateMean) {
  const std::string html = render();
  const std::string bars = element(html, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"bars\"", "</svg>");
  EXPECT_EQ(count(bars, "<g class=\"bar\""), 3u + wrong());
  EXPECT_EQ(has(bars, "data-arm=\"baseline\" data-total=\"5\""), !wrong());  // 3 + 2, not iteration 1's 9
  EXPECT_EQ(has(bars, "data-arm=\"syncfree\" data-total=\"1\""), !wrong());
  EXPECT_EQ(has(bars, "data-site=\"timers\" data-value=\"2\""), !wrong());
}

TEST_F(ReportTest, TimelineHasEveryIntervalAtItsReportingIteration) {
  const std::string html = render();
  const std::string tl = element(html, "class=\"timeline\"", "</svg>");
  EXPECT_EQ(count(tl, "<g class=\"mark\""), 11u + wrong());  // 4 + 3 + 4 from the last rank
  EXPECT_EQ(has(tl, "data-arm=\"syncfree\" data-timer=\"forward-backward\" data-iteration=\"3\" data-seq=\"1\""), !wrong());
  EXPECT_EQ(has(tl, "data-arm=\"syncfree\" data-timer=\"forward-backward\" data-iteration=\"1\""), wrong() == 1);
}

// ---- failures, escaping, self-containment ----

TEST_F(ReportTest, FailureShowsTheFirstDifferingValueInHexfloat) {
  const std::string html = render();
  const std::string f = element(html, "<div class=\"failure\" data-fixture=\"tp2sp\" data-check=\"equivalence\" "
                                      "data-arm=\"defect-x\">", "</div>");
  ASSERT_FALSE(f.empty());
  const std::string first = element(f, "<tr class=\"mismatch\">", "</tr>");
  EXPECT_EQ(has(first, "<td>learning_rate</td><td class=\"num\">3</td><td class=\"num\">1</td>"), !wrong());
  EXPECT_EQ(has(first, "<code>0x1.c72f92p-11</code>"), !wrong());
  EXPECT_EQ(has(first, "<code>0x1.c72f94p-11</code>"), !wrong());
  EXPECT_EQ(has(html, "GatePower.SyncBudgetRejects"), !wrong());  // the failed planted-defect test
}

TEST_F(ReportTest, EveryTextIsEscapedAndNothingIsFetched) {
  const std::string html = render();
  EXPECT_EQ(count(html, "<script"), 0u + wrong());
  EXPECT_EQ(count(html, "&lt;script&gt;alert(1)&lt;/script&gt;"), 1u + wrong());
  const std::string no_ns = std::regex_replace(html, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "");
  for (const char* ref : {"http:", "https:", "src=", "<link", "url(", "@import"})
    EXPECT_EQ(count(no_ns, ref), 0u + wrong()) << ref;
}

// ---- input errors ----

TEST_F(ReportTest, MissingOrMalformedInputIsAnInputError) {
  fs::remove(dir_ / "tp2sp" / "clean__syncfree.json");
  try {  // the known answer: an InputError naming the missing Trace
    render();
    ADD_FAILURE() << "a gate JSON whose Trace is missing rendered";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("clean__syncfree.json") != std::string::npos, !wrong()) << e.what();
  }
  write_json({{"fixtures", nlohmann::json::array()}});  // no verdict
  if (wrong()) EXPECT_NO_THROW(render());
  else EXPECT_THROW(render(), InputError);
  if (wrong()) EXPECT_NO_THROW(render_report_file((dir_ / "absent.json").string(), ""));
  else EXPECT_THROW(render_report_file((dir_ / "absent.json").string(), ""), InputError);
}

TEST_F(ReportTest, GateJsonRoundTrips) {
  const GateSummary g = gate_from_json(json_);
  EXPECT_EQ(g.arms, (std::vector<std::string>{"syncfree", wrong() ? "baseline" : "defect-x"}));
  ASSERT_EQ(g.runs.size(), 2u);
  EXPECT_EQ(g.runs[0].traces.size(), 4u + wrong());
  EXPECT_EQ(g.runs[0].traces[3].scenario, "nan:loss");
  EXPECT_EQ(gate_to_json(g).dump(), wrong() ? "" : json_.dump());
}

}  // namespace
}  // namespace loopgate
