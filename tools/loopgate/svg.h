// Inline-SVG drawing for `loopgate report`: a line chart, a stacked horizontal bar chart and a timeline grid,
// each returned as one <svg> element string with the data it drew in data-* attributes (so a checker can read
// the numbers back). Plain strings in, markup out: no Trace, no gate JSON, no page layout (report.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace loopgate {

// Text for HTML/SVG content and attribute values: & < > " ' escaped.
std::string html_escape(const std::string& s);
// Series colour i of a fixed palette (distinguishable, cycles after 16).
std::string palette_color(size_t i);

// ---- line chart ----

struct Series {
  std::string name;                // the arm
  std::vector<int64_t> x;          // iterations
  std::vector<double> y;           // values (non-finite ones leave a gap)
  std::vector<std::string> label;  // per point, shown on hover (<title>)
  std::vector<std::string> exact;  // per point, one token without spaces (a hexfloat): data-values
  std::string color;
  double width = 2.0;
};

struct LineChart {
  std::string title;
  std::map<std::string, std::string> attrs;  // extra attributes on <svg> (data-fixture, data-field)
  std::vector<Series> series;                // drawn in order: put the widest first so overlaps stay visible
};
std::string svg_line_chart(const LineChart& chart);

// ---- stacked horizontal bars ----

struct Bar {
  std::string name;                                   // the arm
  std::vector<std::pair<std::string, double>> parts;  // (site, value), drawn left to right
};
// `keys`: every part name in legend order; a part's colour is its key's palette colour.
std::string svg_stacked_bars(const std::string& title, const std::vector<Bar>& bars, const std::vector<std::string>& keys,
                             const std::map<std::string, std::string>& attrs);

// ---- timeline grid ----

struct TimelineMark {
  std::string group, row;  // arm, timer name
  int64_t column = 0;      // the iteration that reported it
  int64_t seq = 0;         // the interval's sequence number
  double seconds = 0;
  std::string label;       // hover text
};
// One row per (group, row) (groups in first-seen order, rows by name), one column per iteration in [first, last]. A mark's bar length
// is its seconds relative to the longest mark of the same row name; its colour says how many iterations late it
// was reported (column - 1 - seq: 0, 1, 2+).
std::string svg_timeline(const std::string& title, const std::vector<TimelineMark>& marks, int64_t first, int64_t last,
                         const std::map<std::string, std::string>& attrs);

}  // namespace loopgate
