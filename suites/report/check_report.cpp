// check_report --gate gate.json --html report.html: checks a page written by `loopgate report` against the gate
// JSON and the Traces it lists, recomputing every expectation here (not through the report's code): each
// (fixture, check) row with its cells, per fixture with a clean Trace one SVG per chart holding one series per arm
// whose data-values are the last rank's hexfloats, the reads bars and every timer interval, each failed
// verdict's block with the first hexfloat of its message, the header's totals, and no external reference.
// --require-clean-traces: also demand that the gate JSON lists a clean-scenario Trace for baseline and for every
// candidate arm with a verdict (true when the checks run include equivalence), so a gate that lists no Trace
// cannot pass as "no charts expected". Exit 0 when every check holds, 1 with one line per problem, 2 on bad
// input. Used by the CTest report_e2e.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/loop/trace.h"

namespace {

using nlohmann::json;
std::vector<std::string> problems;

void expect(bool ok, const std::string& what) {
  if (!ok) problems.push_back(what);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string escape(const std::string& s) {  // what the page must show for s
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else if (c == '\'') o += "&#39;";
    else o += c;
  }
  return o;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// ---- the page's SVGs, by their open tag's attributes ----

struct Svg {
  std::map<std::string, std::string> attrs;
  std::string body;
};

std::vector<Svg> svgs(const std::string& html) {
  std::vector<Svg> out;
  static const std::regex kAttr(R"(([a-z-]+)="([^"]*)\")");
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    const size_t tag_end = html.find('>', at), end = html.find("</svg>", at);
    Svg s;
    const std::string tag = html.substr(at, tag_end - at);
    for (std::sregex_iterator it(tag.begin(), tag.end(), kAttr), e; it != e; ++it) s.attrs[(*it)[1]] = (*it)[2];
    s.body = html.substr(at, end == std::string::npos ? std::string::npos : end - at);
    out.push_back(s);
  }
  return out;
}

const Svg* find_svg(const std::vector<Svg>& all, const std::string& cls, const std::string& fixture,
                    const std::string& field = "") {
  for (const Svg& s : all)
    if (s.attrs.count("class") && s.attrs.at("class") == cls && s.attrs.count("data-fixture") &&
        s.attrs.at("data-fixture") == escape(fixture) && (field.empty() || s.attrs.count("data-field") && s.attrs.at("data-field") == field))
      return &s;
  return nullptr;
}

// ---- checks ----

void check_self_contained(const std::string& html) {
  const std::string no_ns = std::regex_replace(html, std::regex(R"(xmlns="http://www\.w3\.org/2000/svg")"), "");
  for (const char* ref : {"<script", "http:", "https:", "src=", "<link", "url(", "@import"})
    expect(count(no_ns, ref) == 0, fmt::format("the page holds '{}' (it must be self-contained, without script)", ref));
}

void check_header(const json& gate, const std::string& html) {
  size_t total = 0, failed = 0;
  for (const json& f : gate["fixtures"])
    for (const json& v : f.value("verdicts", json::array())) {
      ++total;
      failed += !v["passed"].get<bool>();
    }
  expect(count(html, fmt::format("data-total=\"{}\" data-failed=\"{}\"", total, failed)) == 1,
         fmt::format("header: no totals of {} verdicts, {} failed", total, failed));
  const std::string overall = gate["verdict"] == "pass" ? "OK" : "FAILED";
  expect(count(html, "id=\"overall\">" + overall + "</span>") == 1, "header: overall verdict is not " + overall);
}

std::string tally_text(int passed, int total) {
  return passed == total ? "PASS" : fmt::format("FAIL {}/{}", total - passed, total);
}

void check_rows(const json& gate, const std::string& html) {
  const std::vector<std::string> arms = gate["arms"];
  size_t rows = 0;
  for (const json& f : gate["fixtures"]) {
    std::map<std::string, std::map<std::string, std::pair<int, int>>> by_check;  // check -> arm -> (passed, total)
    for (const json& v : f.value("verdicts", json::array())) {
      auto& t = by_check[v["check"]][v["arm"]];
      t.first += v["passed"].get<bool>();
      t.second += 1;
    }
    const std::string fixture = f["fixture"];
    for (const auto& entry : by_check) {
      const std::string& check = entry.first;  // not a structured binding: lambdas below capture it (C++17)
      const auto& cells = entry.second;
      ++rows;
      const std::string open =
          fmt::format("<tr class=\"verdict-row\" data-fixture=\"{}\" data-check=\"{}\">", escape(fixture), escape(check));
      const size_t at = html.find(open);
      if (at == std::string::npos) {
        problems.push_back(fmt::format("verdict table: no row {} {}", fixture, check));
        continue;
      }
      const std::string row = html.substr(at, html.find("</tr>", at) - at);
      auto all = cells.find("(all)");
      auto expect_cell = [&](const std::string& column, const std::string& text) {
        expect(row.find(fmt::format("data-arm=\"{}\">{}</td>", escape(column), escape(text))) != std::string::npos,
               fmt::format("verdict table: {} {} {}: expected '{}'", fixture, check, column, text));
      };
      expect_cell("baseline", all == cells.end() ? "-" : tally_text(all->second.first, all->second.second));
      for (const std::string& arm : arms) {
        auto own = cells.find(arm);
        if (own == cells.end()) {
          expect_cell(arm, "-");
          continue;
        }
        int passed = own->second.first, total = own->second.second;
        if (all != cells.end()) passed += all->second.first, total += all->second.second;
        expect_cell(arm, tally_text(passed, total));
      }
      auto d = cells.find("(planted defect)");
      expect_cell("(planted defect)", d == cells.end() ? "-" : d->second.first == d->second.second ? "REJECTED" : "ACCEPTED!");
    }
  }
  expect(count(html, "<tr class=\"verdict-row\"") == rows, fmt::format("verdict table: expected {} rows", rows));
}

double field_of(const loopgate::IterationRecord& r, const std::string& f) {
  if (f == "lm_loss") return r.lm_loss;
  if (f == "params_norm") return r.params_norm;
  if (f == "grad_norm") return r.grad_norm;
  return r.learning_rate;
}

void check_listed(const json& f) {
  std::set<std::string> want = {"baseline"}, have;
  for (const json& v : f.value("verdicts", json::array()))
    if (v["arm"] != "(all)" && v["arm"] != "(planted defect)") want.insert(v["arm"].get<std::string>());
  for (const json& t : f.value("traces", json::array()))
    if (t["scenario"] == "clean") have.insert(t["arm"].get<std::string>());
  for (const std::string& arm : want)
    expect(have.count(arm) == 1, fmt::format("{}: the gate JSON lists no clean Trace of {}", f["fixture"].get<std::string>(), arm));
}

// Returns the number of SVGs this fixture must have.
size_t check_fixture(const json& f, const std::vector<Svg>& all) {
  const std::string fixture = f["fixture"];
  std::vector<loopgate::Trace> clean;
  for (const json& t : f.value("traces", json::array()))
    if (t["scenario"] == "clean") clean.push_back(loopgate::read_trace(t["path"]));
  if (clean.empty()) return 0;
  for (const char* field : {"lm_loss", "params_norm", "grad_norm", "learning_rate"}) {
    const Svg* s = find_svg(all, "chart", fixture, field);
    if (s == nullptr) {
      problems.push_back(fmt::format("{}: no chart of {}", fixture, field));
      continue;
    }
    expect(count(s->body, "<g class=\"series\"") == clean.size(),
           fmt::format("{} {}: {} series for {} arms", fixture, field, count(s->body, "<g class=\"series\""), clean.size()));
    for (const loopgate::Trace& t : clean) {  // the series holds the last rank's exact values
      std::string iters, values;
      for (int64_t it : t.iterations()) {
        const loopgate::IterationRecord* r = t.find(it, t.world - 1);
        if (r == nullptr) continue;
        iters += (iters.empty() ? "" : " ") + std::to_string(it);
        values += (values.empty() ? "" : " ") + loopgate::hex(field_of(*r, field));
      }
      expect(s->body.find(fmt::format("data-arm=\"{}\" data-iterations=\"{}\" data-values=\"{}\"", escape(t.arm), iters,
                                      escape(values))) != std::string::npos,
             fmt::format("{} {}: the series of {} does not hold the Trace's values {}", fixture, field, t.arm, values));
    }
  }
  const Svg* bars = find_svg(all, "bars", fixture);
  expect(bars != nullptr && count(bars->body, "<g class=\"bar\"") == clean.size(),
         fmt::format("{}: host-read bars missing or not one per arm", fixture));
  size_t intervals = 0;
  for (const loopgate::Trace& t : clean)
    for (const loopgate::IterationRecord& r : t.records)
      if (r.rank == t.world - 1) intervals += r.timer_intervals.size();
  const Svg* tl = find_svg(all, "timeline", fixture);
  expect(intervals == 0 || (tl != nullptr && count(tl->body, "<g class=\"mark\"") == intervals),
         fmt::format("{}: the timeline does not show the {} timer intervals", fixture, intervals));
  return 5 + (intervals > 0);
}

void check_failures(const json& gate, const std::string& html) {
  static const std::regex kHexfloat(R"(-?0x[0-9a-f]+(\.[0-9a-f]+)?p[+-][0-9]+)");
  for (const json& f : gate["fixtures"])
    for (const json& v : f.value("verdicts", json::array())) {
      if (v["passed"].get<bool>()) continue;
      // Strings, not json: given a json, ADL also finds nlohmann's own detail::escape (nlohmann 3.11.3 with g++ 13 on
      // the GPU image picked it, and the GPU build failed).
      const std::string open = fmt::format("<div class=\"failure\" data-fixture=\"{}\" data-check=\"{}\" data-arm=\"{}\">",
                                           escape(f["fixture"].get<std::string>()),
                                           escape(v["check"].get<std::string>()), escape(v["arm"].get<std::string>()));
      // One check can fail several tests of one arm: the verdict's block is the one with its message.
      const std::string message = v["message"];
      const std::string first_line = message.substr(0, message.find('\n'));
      size_t at = html.find(open);
      if (at == std::string::npos) {
        problems.push_back("no failure block for " + v["test"].get<std::string>());
        continue;
      }
      for (size_t next = at; next != std::string::npos; next = html.find(open, next + 1)) {
        if (html.substr(next, html.find("</div>", next) - next).find(escape(first_line)) != std::string::npos) {
          at = next;
          break;
        }
      }
      const std::string block = html.substr(at, html.find("</div>", at) - at);
      std::smatch m;
      if (std::regex_search(message, m, kHexfloat))
        expect(block.find(m[0].str()) != std::string::npos,
               fmt::format("failure block of {} lacks the first differing value {}", v["test"].get<std::string>(), m[0].str()));
      expect(block.find(escape(first_line)) != std::string::npos,
             "failure block of " + v["test"].get<std::string>() + " lacks the message's first line");
    }
}

}  // namespace

int main(int argc, char** argv) {
  std::string gate_path, html_path;
  bool require_clean = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--require-clean-traces") require_clean = true;
    else if (a == "--gate" && i + 1 < argc) gate_path = argv[++i];
    else if (a == "--html" && i + 1 < argc) html_path = argv[++i];
  }
  if (gate_path.empty() || html_path.empty()) {
    std::cerr << "usage: check_report --gate gate.json --html report.html [--require-clean-traces]\n";
    return 2;
  }
  json gate;
  std::string html;
  try {
    gate = json::parse(read_file(gate_path));
    html = read_file(html_path);
    check_self_contained(html);
    check_header(gate, html);
    check_rows(gate, html);
    const std::vector<Svg> all = svgs(html);
    size_t expected_svgs = 0;
    for (const json& f : gate["fixtures"]) {
      if (require_clean) check_listed(f);
      expected_svgs += check_fixture(f, all);
    }
    expect(all.size() == expected_svgs, fmt::format("{} SVGs on the page, {} expected", all.size(), expected_svgs));
    check_failures(gate, html);
    if (problems.empty())
      std::cout << fmt::format("check_report: OK: {} SVGs, {} verdict rows, {} failure blocks, all from {}\n", all.size(),
                               count(html, "<tr class=\"verdict-row\""), count(html, "<div class=\"failure\""), gate_path);
  } catch (const std::exception& e) {
    std::cerr << "check_report: error: " << e.what() << "\n";
    return 2;
  }
  for (const std::string& p : problems) std::cout << "check_report: FAIL: " << p << "\n";
  return problems.empty() ? 0 : 1;
}
