#include "bench/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace deltafin::svg {

namespace {

constexpr double kLegendRow = 18;  // pixels per legend entry

// Pixel coordinates with one decimal: enough for any screen, and short.
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string attr(const char* name, double v) { return std::string(" ") + name + "=\"" + px(v) + "\""; }

void text(std::string& out, double x, double y, const std::string& s, const char* anchor, const std::string& extra = "") {
  out += "<text" + attr("x", x) + attr("y", y) + " text-anchor=\"" + anchor + "\"" + extra + ">" + xml_escape(s) +
         "</text>\n";
}

void open_svg(std::string& out, int width, int height) {
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

void title_and_note(std::string& out, const std::string& title, const std::string& note) {
  if (!title.empty()) text(out, kLeft, 22, title, "start", " font-size=\"16\" font-weight=\"bold\"");
  if (!note.empty()) text(out, kLeft, 40, note, "start", " fill=\"#555\"");
}

// Ticks inside [lo, hi] only (the x axis spans the data, not the ticks).
std::vector<double> ticks_within(double lo, double hi, bool integers) {
  std::vector<double> all = nice_ticks(lo, hi);
  const double step = all.size() > 1 ? all[1] - all[0] : 1;
  if (integers && step < 1) {  // bars are whole tokens: no tick at 2.5
    all.clear();
    for (double v = std::ceil(lo); v <= hi; v += 1) all.push_back(v);
  }
  std::vector<double> in;
  const double eps = (hi - lo) * 1e-9;
  for (double v : all)
    if (v >= lo - eps && v <= hi + eps) in.push_back(v);
  return in;
}

double step_of(const std::vector<double>& ticks) { return ticks.size() > 1 ? ticks[1] - ticks[0] : 1; }

// Grid lines, the plot border, tick marks and labels, and the axis labels.
void axes(std::string& out, const Frame& f, const std::vector<double>& x_ticks, const std::vector<double>& y_ticks,
          const std::string& x_label, const std::string& y_label, int height) {
  out += "<g stroke=\"#e3e3e3\">\n";
  for (double y : y_ticks)
    out += "<line" + attr("x1", f.left) + attr("x2", f.right) + attr("y1", f.y_px(y)) + attr("y2", f.y_px(y)) + "/>\n";
  for (double x : x_ticks)
    out += "<line" + attr("x1", f.x_px(x)) + attr("x2", f.x_px(x)) + attr("y1", f.top) + attr("y2", f.bottom) + "/>\n";
  out += "</g>\n";
  out += "<rect" + attr("x", f.left) + attr("y", f.top) + attr("width", f.width()) + attr("height", f.height()) +
         " fill=\"none\" stroke=\"#888\"/>\n";
  const double ys = step_of(y_ticks), xs = step_of(x_ticks);
  for (double y : y_ticks) text(out, f.left - 6, f.y_px(y) + 4, tick_label(y, ys), "end");
  for (double x : x_ticks) {
    out += "<line" + attr("x1", f.x_px(x)) + attr("x2", f.x_px(x)) + attr("y1", f.bottom) + attr("y2", f.bottom + 4) +
           " stroke=\"#888\"/>\n";
    text(out, f.x_px(x), f.bottom + 17, tick_label(x, xs), "middle");
  }
  if (!x_label.empty()) text(out, (f.left + f.right) / 2, height - 12, x_label, "middle");
  if (!y_label.empty()) {
    const double cx = 16, cy = (f.top + f.bottom) / 2;
    text(out, cx, cy, y_label, "middle", " transform=\"rotate(-90 " + px(cx) + " " + px(cy) + ")\"");
  }
}

struct LegendEntry {
  std::string name, color;
  enum { Line, Dot, Box } mark;
};

void legend(std::string& out, const Frame& f, const std::vector<LegendEntry>& entries) {
  const double x = f.right + 14;
  double y = f.top + 6;
  for (const LegendEntry& e : entries) {
    if (e.mark == LegendEntry::Line)
      out += "<line" + attr("x1", x) + attr("x2", x + 18) + attr("y1", y + 6) + attr("y2", y + 6) + " stroke=\"" +
             e.color + "\" stroke-width=\"3\"/>\n";
    else if (e.mark == LegendEntry::Dot)
      out += "<circle" + attr("cx", x + 9) + attr("cy", y + 6) + " r=\"3.5\" fill=\"" + e.color + "\"/>\n";
    else
      out += "<rect" + attr("x", x + 2) + attr("y", y) + " width=\"14\" height=\"12\" fill=\"" + e.color + "\"/>\n";
    text(out, x + 24, y + 10, e.name, "start");
    y += kLegendRow;
  }
}

void no_data(std::string& out, const Frame& f) {
  text(out, (f.left + f.right) / 2, (f.top + f.bottom) / 2, "no data", "middle", " fill=\"#888\"");
}

// A clip rectangle so a fixed y_max or x range cuts lines at the plot border.
void open_clip(std::string& out, const Frame& f) {
  out += "<clipPath id=\"plot\"><rect" + attr("x", f.left) + attr("y", f.top) + attr("width", f.width()) +
         attr("height", f.height()) + "/></clipPath>\n<g clip-path=\"url(#plot)\">\n";
}

// Up to ~2 points per pixel column are drawn as they are.
bool dense(const Series& s, const Frame& f) { return s.points.size() > 2 * static_cast<size_t>(std::max(1.0, f.width())); }

void draw_line(std::string& out, const Series& s, const std::string& color, const Frame& f) {
  std::string pts;
  auto flush = [&] {
    if (!pts.empty())
      out += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
    pts.clear();
  };
  for (const Point& p : s.points) {
    if (std::isnan(p.y)) {
      flush();
      continue;
    }
    if (!pts.empty()) pts += ' ';
    pts += px(f.x_px(p.x)) + "," + px(f.y_px(p.y));
  }
  flush();
}

// Each point a zero-length stroke with round caps: a dot in 15 bytes, where a
// <circle> takes 45.
void draw_points(std::string& out, const Series& s, const std::string& color, const Frame& f) {
  std::string d;
  for (const Point& p : s.points)
    if (!std::isnan(p.y)) d.append("M").append(px(f.x_px(p.x))).append(" ").append(px(f.y_px(p.y))).append("h0");
  out += "<path fill=\"none\" stroke=\"" + color + "\" stroke-width=\"4\" stroke-linecap=\"round\" d=\"" + d + "\"/>\n";
}

// A dense series: per pixel column, its min..max. A line becomes a band (its
// outline keeps a flat stretch visible); points become one vertical stroke
// per column.
void draw_envelope(std::string& out, const Series& s, const std::string& color, const Frame& f) {
  const int columns = static_cast<int>(std::max(1.0, std::floor(f.width())));
  const std::vector<EnvelopeColumn> cols = envelope_columns(s.points, f.x_min, f.x_max, columns);
  if (cols.empty()) return;
  const double col_w = f.width() / columns;
  auto col_x = [&](const EnvelopeColumn& c) { return f.left + (c.column + 0.5) * col_w; };
  if (s.style == Style::Line) {
    std::string pts;
    for (const EnvelopeColumn& c : cols) pts += px(col_x(c)) + "," + px(f.y_px(c.max)) + " ";
    for (auto it = cols.rbegin(); it != cols.rend(); ++it) pts += px(col_x(*it)) + "," + px(f.y_px(it->min)) + " ";
    pts.pop_back();
    out += "<polygon fill=\"" + color + "\" fill-opacity=\"0.35\" stroke=\"" + color +
           "\" stroke-width=\"1\" stroke-linejoin=\"round\" points=\"" + pts + "\"/>\n";
    return;
  }
  std::string d;
  for (const EnvelopeColumn& c : cols) {
    double top = f.y_px(c.max), bottom = f.y_px(c.min);
    d.append("M").append(px(col_x(c))).append(" ").append(px(top)).append("V").append(px(bottom));
  }
  // As wide as a sparse series' dots, so the two kinds look alike side by side.
  out += "<path fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" + px(std::max(3.0, col_w)) +
         "\" stroke-linecap=\"round\" d=\"" + d + "\"/>\n";
}

// The legend column grows for long names (~7 pixels a character at 12 px),
// up to a third of the picture.
double plot_right(int width, const std::vector<std::string>& names) {
  if (names.empty()) return width - kRight;
  size_t longest = 0;
  for (const std::string& n : names) longest = std::max(longest, n.size());
  const double wanted = 14 + 24 + 7.0 * static_cast<double>(longest) + 8;
  return width - std::clamp(wanted, kLegendWidth, std::max(kLegendWidth, width / 3.0));
}

std::vector<std::string> series_names(const std::vector<Series>& series) {
  std::vector<std::string> names;
  for (const Series& s : series)
    if (!s.name.empty()) names.push_back(s.name);
  return names;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += ' ';
        else out += c;
    }
  }
  return out;
}

const char* palette(size_t i) {
  // Tableau 10: distinct hues that stay apart for the colour-blind too.
  static const char* const colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                       "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return colors[i % (sizeof colors / sizeof colors[0])];
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(hi - lo)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  // One value (or a range too thin for doubles to step through): a small range
  // around it, which also keeps lo / step and the tick count small.
  if (hi - lo <= std::max(std::fabs(lo), std::fabs(hi)) * 1e-9) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  target = std::max(target, 2);
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw * (1 - 1e-9)) {
      step = m * mag;
      break;
    }
  // Integer multiples of the step, so 0.1 * 3 prints as 0.3 and the ends are exact.
  const auto first = static_cast<long long>(std::floor(lo / step + 1e-9));
  const auto last = static_cast<long long>(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (long long i = first; i <= last; ++i) ticks.push_back(static_cast<double>(i) * step);
  if (ticks.size() < 2) ticks.push_back(static_cast<double>(last + 1) * step);
  return ticks;
}

std::string tick_label(double value, double step) {
  if (std::fabs(value) < std::fabs(step) * 1e-9) value = 0;  // no "-0"
  char buf[48];
  if (std::fabs(value) >= 1e7) {
    std::snprintf(buf, sizeof buf, "%.3g", value);
    return buf;
  }
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

double Frame::x_px(double x) const { return left + (x - x_min) / (x_max - x_min) * width(); }
double Frame::y_px(double y) const { return bottom - (y - y_min) / (y_max - y_min) * height(); }

std::vector<EnvelopeColumn> envelope_columns(const std::vector<Point>& points, double x_min, double x_max,
                                             int columns) {
  columns = std::max(columns, 1);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> lo(columns, inf), hi(columns, -inf);
  const double span = x_max - x_min;
  for (const Point& p : points) {
    if (std::isnan(p.y) || !std::isfinite(p.x)) continue;
    // Clamped as a double: a far-away x must not overflow the int.
    const double pos = span > 0 ? std::floor((p.x - x_min) / span * columns) : 0.0;
    const int c = static_cast<int>(std::clamp(pos, 0.0, static_cast<double>(columns - 1)));
    lo[c] = std::min(lo[c], p.y);
    hi[c] = std::max(hi[c], p.y);
  }
  std::vector<EnvelopeColumn> out;
  for (int c = 0; c < columns; ++c)
    if (lo[c] <= hi[c]) out.push_back({c, lo[c], hi[c]});
  return out;
}

Frame LineChart::frame() const {
  const double inf = std::numeric_limits<double>::infinity();
  double xlo = inf, xhi = -inf, ylo = inf, yhi = -inf;
  for (const Series& s : series) {
    for (const Point& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      xlo = std::min(xlo, p.x), xhi = std::max(xhi, p.x);
      ylo = std::min(ylo, p.y), yhi = std::max(yhi, p.y);
    }
  }
  if (xlo > xhi) xlo = 0, xhi = 1, ylo = 0, yhi = 1;  // no data
  if (x_min) xlo = *x_min;
  if (x_max) xhi = *x_max;
  if (xhi <= xlo) xhi = xlo + 1;  // a single x: give it some room
  if (y_from_zero) ylo = std::min(ylo, 0.0), yhi = std::max(yhi, 0.0);
  if (y_max) yhi = *y_max;
  const std::vector<double> yt = nice_ticks(ylo, yhi);
  Frame f;
  f.left = kLeft, f.top = kTop, f.right = plot_right(width, series_names(series)), f.bottom = height - kBottom;
  f.x_min = xlo, f.x_max = xhi, f.y_min = yt.front(), f.y_max = yt.back();
  return f;
}

std::string LineChart::svg() const {
  const Frame f = frame();
  std::string out;
  open_svg(out, width, height);
  title_and_note(out, title, note);
  axes(out, f, ticks_within(f.x_min, f.x_max, false), nice_ticks(f.y_min, f.y_max), x_label, y_label, height);
  std::vector<LegendEntry> entries;
  bool any = false;
  open_clip(out, f);
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const std::string color = s.color.empty() ? palette(i) : s.color;
    any = any || !s.points.empty();
    if (dense(s, f)) draw_envelope(out, s, color, f);
    else if (s.style == Style::Line) draw_line(out, s, color, f);
    else draw_points(out, s, color, f);
    if (!s.name.empty()) entries.push_back({s.name, color, s.style == Style::Line ? LegendEntry::Line : LegendEntry::Dot});
  }
  out += "</g>\n";
  if (!any) no_data(out, f);
  legend(out, f, entries);
  out += "</svg>\n";
  return out;
}

std::vector<std::vector<double>> merge_bars(const std::vector<std::vector<double>>& bars, size_t group) {
  group = std::max<size_t>(group, 1);
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < bars.size(); i += group) {
    const size_t end = std::min(bars.size(), i + group);
    std::vector<double> mean;
    for (size_t j = i; j < end; ++j) {
      if (mean.size() < bars[j].size()) mean.resize(bars[j].size(), 0.0);
      for (size_t c = 0; c < bars[j].size(); ++c) mean[c] += bars[j][c];
    }
    for (double& v : mean) v /= static_cast<double>(end - i);
    out.push_back(std::move(mean));
  }
  return out;
}

size_t StackedBarChart::group() const {
  const double plot_w = plot_right(width, components) - kLeft;
  const size_t max_bars = static_cast<size_t>(std::max(1.0, std::floor(plot_w / 2)));  // >= 2 pixels a bar
  return bars.size() <= max_bars ? 1 : (bars.size() + max_bars - 1) / max_bars;
}

std::string StackedBarChart::svg() const {
  const size_t n = bars.size(), g = group();
  const std::vector<std::vector<double>> merged = merge_bars(bars, g);
  double top = 0;
  for (const auto& bar : merged) {
    double sum = 0;
    for (double v : bar) sum += std::max(v, 0.0);
    top = std::max(top, sum);
  }
  const std::vector<double> yt = nice_ticks(0, top > 0 ? top : 1);
  Frame f;
  f.left = kLeft, f.top = kTop, f.right = plot_right(width, components), f.bottom = height - kBottom;
  f.x_min = first_x - 0.5, f.x_max = first_x + std::max<double>(static_cast<double>(n), 1) - 0.5;
  f.y_min = yt.front(), f.y_max = yt.back();

  std::string shown_note = note;
  if (g > 1) shown_note += (note.empty() ? "" : "; ") + ("each bar: mean of " + std::to_string(g) + " " + bar_name + "s");
  std::string out;
  open_svg(out, width, height);
  title_and_note(out, title, shown_note);
  axes(out, f, n ? ticks_within(first_x, first_x + static_cast<double>(n) - 1, true) : std::vector<double>{}, yt,
       x_label, y_label, height);
  if (n == 0) no_data(out, f);
  // One group per component; bar j covers the x span of the bars merged into it.
  for (size_t c = 0; c < components.size(); ++c) {
    out += "<g fill=\"" + std::string(palette(c)) + "\">\n";
    for (size_t j = 0; j < merged.size(); ++j) {
      double base = 0;
      for (size_t k = 0; k < c && k < merged[j].size(); ++k) base += std::max(merged[j][k], 0.0);
      const double v = c < merged[j].size() ? std::max(merged[j][c], 0.0) : 0.0;
      if (v <= 0) continue;
      const double x0 = f.x_px(first_x + static_cast<double>(j * g) - 0.5);
      const double x1 = f.x_px(first_x + static_cast<double>(std::min(n, (j + 1) * g)) - 0.5);
      const double gap = std::min(2.0, (x1 - x0) * 0.2);
      out += "<rect" + attr("x", x0 + gap / 2) + attr("y", f.y_px(base + v)) + attr("width", x1 - x0 - gap) +
             attr("height", f.y_px(base) - f.y_px(base + v)) + "/>\n";
    }
    out += "</g>\n";
  }
  // Legend top to bottom as the stack reads.
  std::vector<LegendEntry> entries;
  for (size_t c = components.size(); c-- > 0;) entries.push_back({components[c], palette(c), LegendEntry::Box});
  legend(out, f, entries);
  out += "</svg>\n";
  return out;
}

}  // namespace deltafin::svg
