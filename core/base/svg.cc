#include "core/base/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/base/utf8.h"

namespace pilot::svg {
namespace {

std::string N(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick label: 3 significant digits, no exponent for ordinary magnitudes.
std::string Tick(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.2g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  }
  return buf;
}

// A "nice" upper bound for an axis starting at 0 or lo.
double NiceStep(double span) {
  if (span <= 0) return 1;
  double raw = span / 5;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string Text(double x, double y, const std::string& s, const char* anchor = "start",
                 const char* extra = "") {
  return "<text x=\"" + N(x) + "\" y=\"" + N(y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + Escape(s) + "</text>";
}

// Legend entries laid out left to right, wrapping at `width`; returns the
// markup and sets *rows.
std::string Legend(const std::vector<std::pair<std::string, std::string>>& entries, double left,
                   double width, double first_y, int* rows) {
  std::string o;
  double lx = left, ly = first_y;
  *rows = entries.empty() ? 0 : 1;
  for (const auto& [name, color] : entries) {
    const double w = 24 + 7.0 * static_cast<double>(name.size());
    if (lx > left && lx + w > width) {
      lx = left;
      ly += 16;
      ++*rows;
    }
    o += "<rect class=\"legend\" x=\"" + N(lx) + "\" y=\"" + N(ly - 9) +
         "\" width=\"10\" height=\"10\" fill=\"" + Escape(color) + "\"/>";
    o += Text(lx + 14, ly, name);
    lx += w;
  }
  return o;
}

// Rows a legend will take (same layout as Legend).
int LegendRows(const std::vector<std::pair<std::string, std::string>>& entries, double left,
               double width) {
  int rows = 0;
  Legend(entries, left, width, 0, &rows);
  return rows;
}

std::string Open(const std::string& id, const std::string& title, int w, int h) {
  return "<svg class=\"chart\" id=\"" + Escape(id) +
         "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" +
         std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) +
         "\" font-family=\"sans-serif\" font-size=\"12\"><title>" + Escape(title) +
         "</title><rect x=\"0\" y=\"0\" width=\"" + std::to_string(w) + "\" height=\"" +
         std::to_string(h) + "\" fill=\"#ffffff\"/>" +
         Text(w / 2.0, 18, title, "middle", " font-weight=\"bold\" font-size=\"14\"");
}

}  // namespace

std::string Escape(std::string_view text) {
  // A line break stays one; every other control and byte that is not UTF-8
  // is spelled out (a page written to a terminal stays inert, and XML
  // admits no C0 control).
  const std::string s = VisibleText(text, Newlines::kKeep);
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string LineChart(const LineChartSpec& spec, const std::vector<Series>& series) {
  const double left = 70, right = 20, top = 30, bottom = 62;
  const double pw = spec.width - left - right, ph = spec.height - top - bottom;
  double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  bool any = false;
  for (const Series& s : series) {
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!any) {
        x0 = x1 = x;
        y0 = y1 = y;
        any = true;
      }
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::vector<std::pair<std::string, std::string>> names;
  for (const Series& s : series) names.emplace_back(s.name, s.color);
  const int extra_rows = std::max(0, LegendRows(names, left, spec.width - right) - 1);
  std::string o = Open(spec.id, spec.title, spec.width, spec.height + 16 * extra_rows);
  if (!any) return o + Text(spec.width / 2.0, spec.height / 2.0, "no data", "middle") + "</svg>";
  if (y0 > 0) y0 = 0;  // bars of time/memory read best from zero
  if (x1 == x0) x1 = x0 + 1;
  const double ystep = NiceStep(y1 - y0);
  y1 = std::ceil(y1 / ystep) * ystep;
  if (y1 <= y0) y1 = y0 + ystep;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return top + ph - (y - y0) / (y1 - y0) * ph; };
  o += "<g class=\"axes\" stroke=\"#888\">";
  o += "<line x1=\"" + N(left) + "\" y1=\"" + N(top + ph) + "\" x2=\"" + N(left + pw) + "\" y2=\"" +
       N(top + ph) + "\"/>";
  o += "<line x1=\"" + N(left) + "\" y1=\"" + N(top) + "\" x2=\"" + N(left) + "\" y2=\"" +
       N(top + ph) + "\"/></g>";
  for (double v = y0; v <= y1 + ystep / 2; v += ystep) {
    o += "<line stroke=\"#eee\" x1=\"" + N(left) + "\" x2=\"" + N(left + pw) + "\" y1=\"" +
         N(py(v)) + "\" y2=\"" + N(py(v)) + "\"/>";
    o += Text(left - 6, py(v) + 4, Tick(v), "end");
  }
  const double xstep = NiceStep(x1 - x0);
  for (double v = std::ceil(x0 / xstep) * xstep; v <= x1 + 1e-9; v += xstep) {
    o += Text(px(v), top + ph + 16, Tick(v), "middle");
  }
  o += Text(left + pw / 2, top + ph + 32, spec.x_label, "middle");
  o += Text(14, top + ph / 2, spec.y_label, "middle",
            (" transform=\"rotate(-90 14 " + N(top + ph / 2) + ")\"").c_str());
  std::vector<std::pair<std::string, std::string>> legend;
  for (const Series& s : series) {
    std::string pts;
    std::string dots;
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      pts += N(px(x)) + "," + N(py(y)) + " ";
      if (s.markers) {
        dots += "<circle class=\"point\" cx=\"" + N(px(x)) + "\" cy=\"" + N(py(y)) +
                "\" r=\"3.5\" fill=\"" + Escape(s.color) + "\"/>";
      }
    }
    if (!pts.empty()) {
      o += "<polyline class=\"series\" data-name=\"" + Escape(s.name) +
           "\" fill=\"none\" stroke-width=\"1.8\" stroke=\"" + Escape(s.color) + "\" points=\"" +
           pts + "\"/>" + dots;
    }
    legend.emplace_back(s.name, s.color);
  }
  int rows = 0;
  o += Legend(legend, left, spec.width - right, spec.height - 12, &rows);
  return o + "</svg>";
}

std::string BarChart(const BarChartSpec& spec, const std::vector<Bar>& bars) {
  const double left = 130, right = 170, top = 32;
  const double pw = spec.width - left - right;
  std::map<std::string, std::string> legend;  // name -> color, first seen
  std::vector<std::string> order;
  double vmax = 0;
  for (const Bar& b : bars) {
    double sum = 0;
    for (const Segment& s : b.segments) {
      sum += std::max(0.0, s.value);
      if (legend.emplace(s.name, s.color).second) order.push_back(s.name);
    }
    vmax = std::max({vmax, sum, b.marker});
  }
  const int rows = static_cast<int>(bars.size());
  const double row_h = spec.bar_height + 10;
  std::vector<std::pair<std::string, std::string>> entries;
  for (const std::string& name : order) entries.emplace_back(name, legend[name]);
  const int legend_rows = std::max(1, LegendRows(entries, left, spec.width - 10.0));
  const int height = static_cast<int>(top + rows * row_h + 62 + 16 * (legend_rows - 1));
  std::string o = Open(spec.id, spec.title, spec.width, height);
  if (bars.empty() || vmax <= 0) {
    return o + Text(spec.width / 2.0, height / 2.0, "no data", "middle") + "</svg>";
  }
  const double step = NiceStep(vmax);
  const double xmax = std::ceil(vmax / step) * step;
  auto px = [&](double v) { return left + v / xmax * pw; };
  const double axis_y = top + rows * row_h;
  for (double v = 0; v <= xmax + step / 2; v += step) {
    o += "<line stroke=\"#eee\" x1=\"" + N(px(v)) + "\" x2=\"" + N(px(v)) + "\" y1=\"" + N(top) +
         "\" y2=\"" + N(axis_y) + "\"/>";
    o += Text(px(v), axis_y + 14, Tick(v), "middle");
  }
  o += Text(left + pw / 2, axis_y + 30, spec.unit, "middle");
  for (int i = 0; i < rows; ++i) {
    const Bar& b = bars[static_cast<size_t>(i)];
    const double y = top + i * row_h + 4;
    o += Text(left - 6, y + spec.bar_height * 0.7, b.label, "end");
    double x = 0;
    for (const Segment& s : b.segments) {
      const double v = std::max(0.0, s.value);
      o += "<rect class=\"bar\" data-name=\"" + Escape(s.name) + "\" x=\"" + N(px(x)) + "\" y=\"" +
           N(y) + "\" width=\"" + N(px(x + v) - px(x)) + "\" height=\"" +
           std::to_string(spec.bar_height) + "\" fill=\"" + Escape(s.color) + "\"><title>" +
           Escape(s.name + ": " + Tick(v) + " " + spec.unit) + "</title></rect>";
      x += v;
    }
    if (b.marker >= 0) {
      o += "<line class=\"marker\" stroke=\"#c00\" stroke-width=\"2\" x1=\"" + N(px(b.marker)) +
           "\" x2=\"" + N(px(b.marker)) + "\" y1=\"" + N(y - 3) + "\" y2=\"" +
           N(y + spec.bar_height + 3) + "\"><title>" + Escape(b.marker_label) + "</title></line>";
    }
    o += Text(px(std::max(x, b.marker)) + 6, y + spec.bar_height * 0.7, b.note);
  }
  int drawn = 0;
  o += Legend(entries, left, spec.width - 10.0, height - 12 - 16.0 * (legend_rows - 1), &drawn);
  return o + "</svg>";
}

}  // namespace pilot::svg
