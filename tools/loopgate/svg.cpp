// Inline-SVG drawing for `loopgate report` (svg.h). Every element carries its data in data-* attributes and a
// <title> (the browser's hover text), so the page needs no JavaScript and a checker can read the numbers back.
// Coordinates: y grows downwards; each chart maps its data range onto a plot box inside fixed margins.
#include "tools/loopgate/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace loopgate {

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string palette_color(size_t i) {
  static const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                         "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#e7ba52",
                                         "#637939", "#ad494a", "#7b4173", "#6baed6"};
  return kPalette[i % (sizeof kPalette / sizeof kPalette[0])];
}

namespace {

std::string attributes(const std::map<std::string, std::string>& attrs) {
  std::string s;
  for (const auto& [k, v] : attrs) s += fmt::format(" {}=\"{}\"", html_escape(k), html_escape(v));
  return s;
}

std::string open_svg(const std::string& css_class, double w, double h, const std::map<std::string, std::string>& attrs,
                     const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\"{}>\n<title>{}</title>\n",
      css_class, w, h, w, h, attributes(attrs), html_escape(title));
}

std::string text(double x, double y, const std::string& s, const std::string& extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\"{}>{}</text>\n", x, y, extra, html_escape(s));
}

// ---- line chart ----

struct Range {
  double lo = 0, hi = 1;
  double at(double v, double from, double to) const { return from + (v - lo) / (hi - lo) * (to - from); }
};

Range y_range(const std::vector<Series>& series, bool* any) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series)
    for (double v : s.y)
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
  *any = std::isfinite(lo);
  if (!*any) return {};
  const double pad = hi > lo ? (hi - lo) * 0.06 : std::max(std::fabs(lo) * 1e-3, 1e-12);
  return {lo - pad, hi + pad};
}

Range x_range(const std::vector<Series>& series) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const Series& s : series)
    for (int64_t x : s.x) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  if (lo > hi) return {0, 1};
  if (lo == hi) return {lo - 0.5, hi + 0.5};
  return {static_cast<double>(lo), static_cast<double>(hi)};
}

// One <g class="series"> per arm: a path (gaps at non-finite values) and a dot per point with its hover text.
std::string series_markup(const Series& s, const Range& xr, const Range& yr, double x0, double x1, double y0,
                          double y1) {
  std::string d, dots, iters, values;
  bool pen_down = false;
  for (size_t i = 0; i < s.x.size(); ++i) {
    iters += (i ? " " : "") + std::to_string(s.x[i]);
    values += (i ? " " : "") + (i < s.exact.size() ? s.exact[i] : "");
    if (!std::isfinite(s.y[i])) {
      pen_down = false;
      continue;
    }
    const double px = xr.at(static_cast<double>(s.x[i]), x0, x1), py = yr.at(s.y[i], y0, y1);
    d += fmt::format("{}{:.2f} {:.2f} ", pen_down ? "L" : "M", px, py);
    pen_down = true;
    dots += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{:.1f}\" fill=\"{}\"><title>{} iteration {}: {}</title></circle>\n",
                        px, py, std::max(s.width / 2 + 0.5, 2.0), s.color, html_escape(s.name), s.x[i],
                        html_escape(i < s.label.size() ? s.label[i] : ""));
  }
  return fmt::format(
      "<g class=\"series\" data-arm=\"{}\" data-iterations=\"{}\" data-values=\"{}\">\n"
      "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{:.2f}\" stroke-linejoin=\"round\" stroke-linecap=\"round\"/>\n{}</g>\n",
      html_escape(s.name), iters, html_escape(values), d, s.color, s.width, dots);
}

}  // namespace

std::string svg_line_chart(const LineChart& c) {
  const double w = 470, h = 250, left = 74, right = 14, top = 28, bottom = 38;
  const double x0 = left, x1 = w - right, y0 = h - bottom, y1 = top;  // y grows downwards
  std::string s = open_svg("chart", w, h, c.attrs, c.title);
  s += text(w / 2, 17, c.title, " class=\"chart-title\" text-anchor=\"middle\"");
  bool any = false;
  const Range yr = y_range(c.series, &any);
  const Range xr = x_range(c.series);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"plot\"/>\n", x0, y1, x1 - x0, y0 - y1);
  if (!any) {
    s += text((x0 + x1) / 2, (y0 + y1) / 2, "no finite values", " text-anchor=\"middle\"");
  } else {
    for (int i = 0; i <= 4; ++i) {  // five horizontal grid lines, labelled with their value
      const double v = yr.lo + (yr.hi - yr.lo) * i / 4, py = yr.at(v, y0, y1);
      s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.2f}\" y2=\"{:.2f}\" class=\"grid\"/>\n", x0, x1, py, py);
      s += text(x0 - 5, py + 4, fmt::format("{:.6g}", v), " text-anchor=\"end\" class=\"tick\"");
    }
  }
  const int64_t first = static_cast<int64_t>(std::ceil(xr.lo)), last = static_cast<int64_t>(std::floor(xr.hi));
  const int64_t step = std::max<int64_t>(1, (last - first + 9) / 10);
  for (int64_t it = first; it <= last; it += step)
    s += text(xr.at(static_cast<double>(it), x0, x1), y0 + 15, std::to_string(it), " text-anchor=\"middle\" class=\"tick\"");
  s += text((x0 + x1) / 2, h - 6, "iteration", " text-anchor=\"middle\" class=\"axis\"");
  if (any)
    for (const Series& sr : c.series) s += series_markup(sr, xr, yr, x0, x1, y0, y1);
  return s + "</svg>\n";
}

// ---- stacked horizontal bars ----

std::string svg_stacked_bars(const std::string& title, const std::vector<Bar>& bars, const std::vector<std::string>& keys,
                             const std::map<std::string, std::string>& attrs) {
  size_t longest_name = 0;
  for (const Bar& b : bars) longest_name = std::max(longest_name, b.name.size());
  const double label_w = 16 + 7.0 * longest_name, bar_w = 460, row_h = 22, top = 30, legend_col = 150;
  const size_t per_line = 4, legend_lines = (keys.size() + per_line - 1) / per_line;
  const double w = label_w + bar_w + 70, h = top + row_h * bars.size() + 16 + 18 * legend_lines;
  double max_total = 0;
  for (const Bar& b : bars) {
    double t = 0;
    for (const auto& p : b.parts) t += p.second;
    max_total = std::max(max_total, t);
  }
  std::string s = open_svg("bars", w, h, attrs, title);
  s += text(w / 2, 17, title, " class=\"chart-title\" text-anchor=\"middle\"");
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = top + row_h * i;
    double x = label_w, total = 0;
    std::string parts;
    for (const auto& [key, value] : b.parts) {
      const size_t k = static_cast<size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
      const double len = max_total > 0 ? value / max_total * bar_w : 0;
      parts += fmt::format(
          "<rect class=\"part\" data-site=\"{}\" data-value=\"{:.6g}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" "
          "height=\"{}\" fill=\"{}\"><title>{}: {} {:.6g} per iteration</title></rect>\n",
          html_escape(key), value, x, y, len, row_h - 6, palette_color(k), html_escape(b.name), html_escape(key), value);
      x += len;
      total += value;
    }
    s += fmt::format("<g class=\"bar\" data-arm=\"{}\" data-total=\"{:.6g}\">\n", html_escape(b.name), total);
    s += text(label_w - 6, y + row_h - 10, b.name, " text-anchor=\"end\"");
    s += parts + text(x + 5, y + row_h - 10, fmt::format("{:.6g}", total), " class=\"tick\"") + "</g>\n";
  }
  for (size_t k = 0; k < keys.size(); ++k) {  // legend: site colours
    const double lx = 10 + legend_col * (k % per_line), ly = top + row_h * bars.size() + 10 + 18 * (k / per_line);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"11\" height=\"11\" fill=\"{}\"/>\n", lx, ly, palette_color(k));
    s += text(lx + 15, ly + 10, keys[k], " class=\"tick\"");
  }
  return s + "</svg>\n";
}

// ---- timeline grid ----

std::string svg_timeline(const std::string& title, const std::vector<TimelineMark>& marks, int64_t first, int64_t last,
                         const std::map<std::string, std::string>& attrs) {
  std::vector<std::pair<std::string, std::string>> rows;  // (group, row)
  std::map<std::string, double> longest;                  // row name -> longest seconds
  std::vector<std::string> groups;                        // first-seen order
  for (const TimelineMark& m : marks) {
    if (std::find(groups.begin(), groups.end(), m.group) == groups.end()) groups.push_back(m.group);
    if (std::find(rows.begin(), rows.end(), std::make_pair(m.group, m.row)) == rows.end()) rows.push_back({m.group, m.row});
    longest[m.row] = std::max(longest[m.row], m.seconds);
  }
  auto group_index = [&](const std::string& g) { return std::find(groups.begin(), groups.end(), g) - groups.begin(); };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {  // groups in order, rows by name
    return std::make_pair(group_index(a.first), a.second) < std::make_pair(group_index(b.first), b.second);
  });
  size_t longest_name = 0;
  for (const auto& [group, row] : rows) longest_name = std::max(longest_name, group.size() + row.size() + 2);
  const double label_w = 16 + 7.0 * longest_name, col_w = 66, row_h = 20, top = 46;
  const int64_t columns = std::max<int64_t>(0, last - first + 1);
  const double w = label_w + col_w * columns + 10, h = top + row_h * rows.size() + 34;
  static const char* const kLagColor[] = {"#9ecae1", "#fdae6b", "#fb6a4a"};  // on time, 1 late, 2+ late
  std::string s = open_svg("timeline", w, h, attrs, title);
  s += text(w / 2, 17, title, " class=\"chart-title\" text-anchor=\"middle\"");
  for (int64_t c = 0; c < columns; ++c)
    s += text(label_w + col_w * (c + 0.5), top - 8, fmt::format("it {}", first + c), " text-anchor=\"middle\" class=\"tick\"");
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = top + row_h * r;
    const bool new_group = r == 0 || rows[r].first != rows[r - 1].first;
    if (new_group)
      s += fmt::format("<line x1=\"0\" x2=\"{}\" y1=\"{}\" y2=\"{}\" class=\"group-line\"/>\n", w, y, y);
    s += text(label_w - 8, y + row_h - 6, (new_group ? rows[r].first + "  " : "") + rows[r].second,
              " text-anchor=\"end\" class=\"tick\"");
    for (int64_t c = 0; c < columns; ++c) {
      std::vector<const TimelineMark*> cell;  // several marks in one cell: two windows reported in one line
      for (const TimelineMark& m : marks)
        if (m.group == rows[r].first && m.row == rows[r].second && m.column == first + c) cell.push_back(&m);
      const double cx = label_w + col_w * c + 3, sub_h = (row_h - 4) / std::max<size_t>(1, cell.size());
      for (size_t k = 0; k < cell.size(); ++k) {
        const TimelineMark& m = *cell[k];
        const int64_t lag = std::clamp<int64_t>(m.column - 1 - m.seq, 0, 2);
        const double len = longest[m.row] > 0 ? m.seconds / longest[m.row] * (col_w - 8) : 0;
        const double my = y + 2 + sub_h * k;
        s += fmt::format(
            "<g class=\"mark\" data-arm=\"{}\" data-timer=\"{}\" data-iteration=\"{}\" data-seq=\"{}\" "
            "data-seconds=\"{:.9g}\"><title>{}</title>\n<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" "
            "fill=\"{}\"/>\n",
            html_escape(m.group), html_escape(m.row), m.column, m.seq, m.seconds, html_escape(m.label), cx, my,
            std::max(len, 1.0), sub_h - 1, kLagColor[lag]);
        s += text(cx + 2, my + sub_h - 4, fmt::format("#{}", m.seq), " class=\"mark-text\"") + "</g>\n";
      }
    }
  }
  const double ly = top + row_h * rows.size() + 16;
  const char* const kLagText[] = {"reported at the iteration it ended", "1 iteration late", "2 or more late"};
  for (int i = 0; i < 3; ++i) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"11\" height=\"11\" fill=\"{}\"/>\n", 10 + 230 * i, ly, kLagColor[i]);
    s += text(25 + 230 * i, ly + 10, kLagText[i], " class=\"tick\"");
  }
  return s + "</svg>\n";
}

}  // namespace loopgate
