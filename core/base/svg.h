// Small SVG charts for the HTML report: inline, no scripts, no external
// resources. Every chart is one <svg class="chart" id="ID"> element with a
// <title>, axes, its marks (<polyline class="series"> for lines, <rect
// class="bar"> for bars) and a legend; all text is XML-escaped.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pilot::svg {

// &, <, >, " and ' escaped for XML text and attributes; controls other
// than '\n' and bytes that are not UTF-8 written out as VisibleText does
// (core/base/utf8.h).
std::string Escape(std::string_view s);

struct Series {
  std::string name;
  std::string color;                              // CSS color, e.g. "#1f77b4"
  std::vector<std::pair<double, double>> points;  // (x, y), any order kept
  bool markers = false;                           // draw a circle at each point
};

struct LineChartSpec {
  std::string id;
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 760;
  int height = 300;
};

// Empty series are listed in the legend but draw nothing; with no point at
// all the chart says "no data".
std::string LineChart(const LineChartSpec& spec, const std::vector<Series>& series);

struct Segment {
  std::string name;  // legend entry (segments with equal names share a color)
  double value = 0;  // >= 0
  std::string color;
};

struct Bar {
  std::string label;
  std::vector<Segment> segments;  // stacked left to right
  double marker = -1;             // a vertical tick at this value (< 0: none)
  std::string marker_label;
  std::string note;  // printed after the bar
};

struct BarChartSpec {
  std::string id;
  std::string title;
  std::string unit;  // axis label, e.g. "GiB"
  int width = 760;
  int bar_height = 22;
};

// Horizontal stacked bars on one shared scale.
std::string BarChart(const BarChartSpec& spec, const std::vector<Bar>& bars);

}  // namespace pilot::svg
