// Small SVG charts with no dependencies, for the pictures deltafin draws of
// its own runs (issue 5): line/point charts of several series and stacked bar
// charts. Every chart has a title, axes with units, nice tick values and a
// legend, and stays readable and small for long runs: a series with more
// points than about two per horizontal pixel is drawn as its min/max per
// pixel column (an envelope), and more bars than pixels are merged.
//
// Layout (fixed, so a test can compute where a point lands): the plot area
// starts kLeft pixels from the left and kTop from the top, ends kBottom above
// the bottom, and kLegendWidth (or kRight when there is no legend; more for
// legend names over 20 characters) before the right edge. The y axis is widened to the nice ticks around the data; the x
// axis spans the data exactly (or x_min/x_max when given).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace deltafin::svg {

constexpr double kLeft = 72, kTop = 56, kBottom = 56, kRight = 24, kLegendWidth = 190;

struct Point {
  double x = 0, y = 0;  // a NaN y breaks a line (a gap)
};

// "&<>\"'" as entities, for text and attribute values.
std::string xml_escape(const std::string& text);

// The i-th color of a fixed palette (wraps around).
const char* palette(size_t i);

// Tick values with a step of 1, 2 or 5 times a power of ten, about `target`
// of them, from a multiple of the step at or below lo to one at or above hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 6);
// A tick value printed with as many decimals as the step needs.
std::string tick_label(double value, double step);

// The plot rectangle (pixels) and the data ranges it shows.
struct Frame {
  double left = 0, top = 0, right = 0, bottom = 0;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  double x_px(double x) const;
  double y_px(double y) const;
  double width() const { return right - left; }
  double height() const { return bottom - top; }
};

// One pixel column's extremes, for drawing a dense series as an envelope.
struct EnvelopeColumn {
  int column = 0;  // 0 .. columns-1 from the left of the plot
  double min = 0, max = 0;
};
// The min and max y of the points falling in each of `columns` equal slices
// of [x_min, x_max] (points outside are clamped to the edge columns; NaN ys
// are skipped); only columns holding points are returned, left to right.
std::vector<EnvelopeColumn> envelope_columns(const std::vector<Point>& points, double x_min, double x_max,
                                             int columns);

enum class Style { Line, Points };

struct Series {
  std::string name;
  std::vector<Point> points;
  Style style = Style::Line;
  std::string color;  // empty: the palette's next color
};

struct LineChart {
  std::string title;
  std::string note;  // a smaller line under the title (bin width, totals, ...)
  std::string x_label, y_label;  // with units, e.g. "time (s)"
  std::vector<Series> series;
  bool y_from_zero = false;
  std::optional<double> x_min, x_max, y_max;  // fixed ends instead of the data's
  int width = 900, height = 420;

  // The frame the series are drawn in (data ranges after nice ticks).
  Frame frame() const;
  std::string svg() const;
};

struct StackedBarChart {
  std::string title, note, x_label, y_label;
  std::vector<std::string> components;   // stacked bottom to top, e.g. "compute", "waiting for reads"
  std::vector<std::vector<double>> bars;  // bars[i][c]: component c of bar i (negative counts as 0)
  double first_x = 0;                     // bar i is drawn at x = first_x + i (e.g. token 1)
  std::string bar_name = "bar";           // for the note on merged bars: "each bar: mean of 4 tokens"
  int width = 900, height = 420;

  // How many adjacent bars are merged into one (1 when each gets >= 2 pixels).
  size_t group() const;
  std::string svg() const;
};

// Means of `group` adjacent bars (the last group may be shorter), so a merged
// chart keeps the unit of one bar (ms per token, not ms per 4 tokens).
std::vector<std::vector<double>> merge_bars(const std::vector<std::vector<double>>& bars, size_t group);

}  // namespace deltafin::svg
