#include "bench/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "bench/xml_check.h"

namespace deltafin::svg {
namespace {

using test::has_text;
using test::xml_problem;

size_t count_of(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t i = s.find(needle); i != std::string::npos; i = s.find(needle, i + 1)) ++n;
  return n;
}

TEST(XmlCheck, CatchesWhatABrowserWouldReject) {
  EXPECT_EQ(xml_problem("<svg><g a=\"1\"/><text>x &amp; y</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g a=1/></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a < b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg/><svg/>"), "");
  EXPECT_NE(xml_problem("<svg a=\"1\" a=\"2\"/>"), "");
  EXPECT_NE(xml_problem("<svg><g></h></svg>"), "");
}

TEST(SvgChart, LineChartHasTitleAxesAndLegend) {
  LineChart c;
  c.title = "Read bandwidth";
  c.note = "100 ms bins";
  c.x_label = "time (s)";
  c.y_label = "bandwidth (MB/s)";
  c.series.push_back({"drive 0", {{0, 1}, {1, 3}, {2, 2}}, Style::Line, ""});
  c.series.push_back({"drive 1", {{0, 2}, {1, 1}, {2, 4}}, Style::Points, ""});
  const std::string s = c.svg();
  EXPECT_EQ(xml_problem(s), "") << s;
  for (const char* t : {"Read bandwidth", "100 ms bins", "time (s)", "bandwidth (MB/s)", "drive 0", "drive 1"})
    EXPECT_TRUE(has_text(s, t)) << t;
  EXPECT_EQ(count_of(s, "<polyline"), 1u);
  EXPECT_EQ(count_of(s, "h0"), 3u);  // three dots
  EXPECT_EQ(count_of(s, "<circle"), 1u);  // the legend's dot
  EXPECT_NE(s.find(palette(0)), std::string::npos);
  EXPECT_NE(s.find(palette(1)), std::string::npos);
}

TEST(SvgChart, MapsAPointToTheHandComputedPixel) {
  LineChart c;
  c.width = 800;
  c.height = 400;
  c.series.push_back({"a", {{0, 0}, {5, 50}, {10, 100}}, Style::Line, ""});
  // Plot area: x from kLeft = 72 to 800 - kLegendWidth = 610, y from kTop = 56
  // to 400 - kBottom = 344. y ticks 0, 20, ..., 100 cover the data exactly.
  const Frame f = c.frame();
  EXPECT_DOUBLE_EQ(f.left, 72);
  EXPECT_DOUBLE_EQ(f.right, 610);
  EXPECT_DOUBLE_EQ(f.top, 56);
  EXPECT_DOUBLE_EQ(f.bottom, 344);
  EXPECT_DOUBLE_EQ(f.y_min, 0);
  EXPECT_DOUBLE_EQ(f.y_max, 100);
  // (5, 50) is the middle: x = 72 + 538 / 2 = 341, y = 344 - 288 / 2 = 200.
  EXPECT_DOUBLE_EQ(f.x_px(5), 341);
  EXPECT_DOUBLE_EQ(f.y_px(50), 200);
  const std::string s = c.svg();
  EXPECT_NE(s.find("points=\"72.0,344.0 341.0,200.0 610.0,56.0\""), std::string::npos) << s;
  for (const char* t : {"0", "20", "40", "60", "80", "100", "2", "4", "6", "8", "10"}) EXPECT_TRUE(has_text(s, t)) << t;
}

TEST(SvgChart, LegendGrowsForLongNames) {
  LineChart c;
  c.width = 800;
  c.series.push_back({"a name of thirty characters ok", {{0, 1}, {1, 2}}, Style::Line, ""});
  // 14 + 24 + 7 * 30 + 8 = 256 pixels of legend.
  EXPECT_DOUBLE_EQ(c.frame().right, 800 - 256);
  c.series[0].name = std::string(200, 'x');  // at most a third of the picture
  EXPECT_NEAR(c.frame().right, 800 - 800 / 3.0, 1e-9);
}

TEST(SvgChart, EscapesTextForXml) {
  LineChart c;
  c.title = "a<b & \"c\" 'd'";
  c.x_label = "x > y";
  c.series.push_back({"<series>", {{0, 1}, {1, 2}}, Style::Line, ""});
  const std::string s = c.svg();
  EXPECT_EQ(xml_problem(s), "") << s;
  EXPECT_NE(s.find("a&lt;b &amp; &quot;c&quot; &apos;d&apos;"), std::string::npos);
  EXPECT_EQ(s.find("a<b"), std::string::npos);
  EXPECT_TRUE(has_text(s, "a<b & \"c\" 'd'"));
  EXPECT_TRUE(has_text(s, "<series>"));
  EXPECT_TRUE(has_text(s, "x > y"));
  EXPECT_EQ(xml_escape(std::string("tab\tbell\a")), "tab\tbell ");
}

TEST(SvgChart, DenseSeriesIsAnEnvelopeAndStaysSmall) {
  // 100,000 points of a sawtooth 0..99, with one spike and one dip.
  std::vector<Point> pts;
  for (int i = 0; i < 100000; ++i) pts.push_back({static_cast<double>(i), static_cast<double>(i % 100)});
  pts[50000].y = 1000;
  pts[70000].y = -500;
  LineChart c;
  c.title = "dense";
  c.width = 800;
  c.height = 400;
  c.series.push_back({"sawtooth", pts, Style::Line, ""});
  c.series.push_back({"as points", pts, Style::Points, ""});
  const std::string s = c.svg();
  EXPECT_EQ(xml_problem(s), "");
  EXPECT_LT(s.size(), 200u * 1000u) << "bytes";
  EXPECT_EQ(count_of(s, "<polygon"), 1u);
  EXPECT_EQ(count_of(s, "<polyline"), 0u);

  // 538 columns over x 0..99999: every column holds ~186 points, so 0..99,
  // except the spike's column (50000 -> 269) and the dip's (70000 -> 376).
  const std::vector<EnvelopeColumn> cols = envelope_columns(pts, 0, 99999, 538);
  ASSERT_EQ(cols.size(), 538u);
  for (const EnvelopeColumn& col : cols) {
    EXPECT_EQ(col.max, col.column == 269 ? 1000 : 99) << col.column;
    EXPECT_EQ(col.min, col.column == 376 ? -500 : 0) << col.column;
  }
  // y ticks -500, 0, 500, 1000: the spike reaches the top of the plot, in the
  // middle of its pixel column (72 + 269.5), and the dip the bottom.
  const Frame f = c.frame();
  EXPECT_DOUBLE_EQ(f.y_min, -500);
  EXPECT_DOUBLE_EQ(f.y_max, 1000);
  EXPECT_NE(s.find("341.5,56.0"), std::string::npos);
  EXPECT_NE(s.find("448.5,344.0"), std::string::npos);  // 72 + 376.5
  EXPECT_NE(s.find("M341.5 56.0V"), std::string::npos);  // the points' stroke for that column
}

TEST(SvgChart, EnvelopeSkipsGapsAndClampsOutsiders) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto cols = envelope_columns({{-5, 1}, {0.5, 2}, {3.9, nan}, {3.5, 7}, {99, 4}}, 0, 4, 4);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(cols[0].column, 0);
  EXPECT_EQ(cols[0].min, 1);
  EXPECT_EQ(cols[0].max, 2);
  EXPECT_EQ(cols[1].column, 3);
  EXPECT_EQ(cols[1].min, 4);
  EXPECT_EQ(cols[1].max, 7);
}

TEST(SvgChart, NanBreaksALine) {
  LineChart c;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  c.series.push_back({"a", {{0, 1}, {1, 2}, {2, nan}, {3, 1}, {4, 2}}, Style::Line, ""});
  const std::string s = c.svg();
  EXPECT_EQ(count_of(s, "<polyline"), 2u);
  EXPECT_EQ(xml_problem(s), "");
}

TEST(SvgChart, NiceTicksCoverTheRangeIn125Steps) {
  EXPECT_EQ(nice_ticks(0, 97), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const std::vector<double> t = nice_ticks(0.013, 0.87);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(tick_label(t[0], 0.2), "0.0");
  EXPECT_EQ(tick_label(t[3], 0.2), "0.6");
  EXPECT_EQ(tick_label(t[5], 0.2), "1.0");
  EXPECT_EQ(tick_label(0.1 * 3, 0.1), "0.3");
  EXPECT_EQ(tick_label(-1e-17, 0.1), "0.0");
  EXPECT_EQ(tick_label(2500, 500), "2500");
  EXPECT_EQ(tick_label(0.05, 0.05), "0.05");
  // Degenerate ranges still give a handful of ticks.
  EXPECT_LE(nice_ticks(1e300, 1e300).size(), 13u);
  EXPECT_LE(nice_ticks(1e15, 1e15 + 1).size(), 13u);
  const std::vector<double> unknown = nice_ticks(std::nan(""), 3);  // no range known: 0..1
  EXPECT_EQ(unknown.front(), 0);
  EXPECT_EQ(unknown.back(), 1);
  const double ranges[][2] = {{0, 1},      {0, 7},      {-3.7, 12345}, {1e-4, 3e-4}, {5, 5},
                              {0, 0},      {17, 18},    {-2, -1},      {0, 1e9},     {0.3, 999.9}};
  for (const auto& r : ranges) {
    const std::vector<double> v = nice_ticks(r[0], r[1]);
    SCOPED_TRACE(std::to_string(r[0]) + " .. " + std::to_string(r[1]));
    ASSERT_GE(v.size(), 2u);
    EXPECT_LE(v.front(), r[0]);
    EXPECT_GE(v.back(), r[1]);
    EXPECT_LE(v.size(), 13u);
    const double step = v[1] - v[0];
    const double m = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    EXPECT_TRUE(std::fabs(m - 1) < 1e-6 || std::fabs(m - 2) < 1e-6 || std::fabs(m - 5) < 1e-6) << m;
    for (double x : v) EXPECT_NEAR(std::remainder(x, step), 0, step * 1e-6) << x;  // multiples of the step
    std::set<std::string> labels;
    for (double x : v) labels.insert(tick_label(x, step));
    EXPECT_EQ(labels.size(), v.size()) << "distinct labels";
  }
}

TEST(SvgChart, StackedBarsLandWhereComputed) {
  StackedBarChart c;
  c.width = 800;
  c.height = 400;
  c.title = "Time per token";
  c.x_label = "token";
  c.y_label = "time (ms)";
  c.components = {"compute", "waiting for reads"};
  c.bars = {{1, 2}, {3, 1}, {0, 4}};
  c.first_x = 1;
  const std::string s = c.svg();
  EXPECT_EQ(xml_problem(s), "") << s;
  for (const char* t : {"Time per token", "token", "time (ms)", "compute", "waiting for reads", "1", "2", "3"})
    EXPECT_TRUE(has_text(s, t)) << t;
  // Plot 72..610 holds 3 bars of 179.33 px with 2 px gaps; y 0..4 over 344..56
  // (72 px per ms). Bar 1 (token 1): compute 0..1 ms, waiting 1..3 ms.
  EXPECT_NE(s.find("<rect x=\"73.0\" y=\"272.0\" width=\"177.3\" height=\"72.0\"/>"), std::string::npos) << s;
  EXPECT_NE(s.find("<rect x=\"73.0\" y=\"128.0\" width=\"177.3\" height=\"144.0\"/>"), std::string::npos);
  // Bar 3 has no compute: only its waiting rect, 0..4 ms.
  EXPECT_NE(s.find("<rect x=\"431.7\" y=\"56.0\" width=\"177.3\" height=\"288.0\"/>"), std::string::npos);
  EXPECT_EQ(c.group(), 1u);
}

TEST(SvgChart, ManyBarsAreMergedAndSaySo) {
  StackedBarChart c;
  c.width = 800;
  c.components = {"compute", "waiting"};
  c.bar_name = "token";
  for (int i = 0; i < 100000; ++i) c.bars.push_back({1.0 + i % 3, i == 500 ? 100.0 : 0.5});
  // 538 px hold 269 bars of 2 px: 100,000 bars merge by ceil(100000 / 269) = 372.
  EXPECT_EQ(c.group(), 372u);
  const std::string s = c.svg();
  EXPECT_EQ(xml_problem(s), "");
  EXPECT_LT(s.size(), 200u * 1000u);
  EXPECT_TRUE(has_text(s, "each bar: mean of 372 tokens"));
  EXPECT_EQ(merge_bars({{1, 2}, {3, 4}, {5, 6}}, 2), (std::vector<std::vector<double>>{{2, 3}, {5, 6}}));
}

TEST(SvgChart, EmptyChartsSayNoData) {
  LineChart l;
  l.title = "nothing";
  StackedBarChart b;
  for (const std::string& s : {l.svg(), b.svg()}) {
    EXPECT_EQ(xml_problem(s), "") << s;
    EXPECT_TRUE(has_text(s, "no data"));
  }
}

}  // namespace
}  // namespace deltafin::svg
