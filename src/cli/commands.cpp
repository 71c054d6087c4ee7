#include "cli/commands.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <vector>

namespace deltafin::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

std::vector<std::string>& command_line_words() {
  static std::vector<std::string> words;
  return words;
}

// A bound as a person writes it: 0.004096, 3600 (not 3.600000e+03).
std::string plain(double v) {
  char buf[400];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

// The whole text as a finite number, or nothing ("abc", "1x", "inf", "").
std::optional<double> parse_number(const std::string& s) {
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

// The help's form of an error's range: "from 0 to 7" -> "0 to 7", "of at
// least 0" -> "at least 0".
std::string help_words(const std::string& range) {
  for (const char* lead : {"from ", "of "})
    if (range.rfind(lead, 0) == 0) return range.substr(std::string(lead).size());
  return range;
}

// Help in words: CLI11 shows "--draft-k INT:INT in [0 - 7]=0"; this shows
// "--draft-k INT" and, after the description, "(from 0 to 7; default 0)".
// The allowed values are the validators' descriptions, which CLI11 keeps
// after the type name, one ':' each (ours contain none).
class WordsHelp : public CLI::Formatter {
public:
  std::string make_option_opts(const CLI::Option* o) const override {
    std::string out;
    if (o->get_type_size() != 0) {
      const std::string type = o->get_type_name();
      out += " " + type.substr(0, type.find(':'));
      if (o->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
      if (o->get_required()) out += " REQUIRED";
    }
    if (!o->get_excludes().empty()) {
      out += " Excludes:";
      for (const CLI::Option* other : o->get_excludes()) out += " " + other->get_name();
    }
    return out;
  }
  std::string make_option_desc(const CLI::Option* o) const override {
    const std::string type = o->get_type_name();
    const size_t colon = type.find(':');
    std::string notes = colon == std::string::npos ? "" : type.substr(colon + 1);
    for (size_t c; (c = notes.find(':')) != std::string::npos;) notes.replace(c, 1, "; ");
    if (!o->get_default_str().empty()) notes += (notes.empty() ? "default " : "; default ") + o->get_default_str();
    return notes.empty() ? o->get_description() : o->get_description() + " (" + notes + ")";
  }
};
}  // namespace

CLI::Validator whole_number(int64_t lo, int64_t hi) {
  const std::string range =
      hi == kNoLimit ? "of at least " + std::to_string(lo) : "from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        const std::optional<double> d = parse_number(s);  // any whole number reads as a double too
        if (!d) return in_quotes(s) + " is not a whole number: give one " + range;
        if (*d != std::floor(*d)) return s + " is not a whole number: give one " + range;
        int64_t v = 0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec != std::errc{} || r.ptr != s.data() + s.size()) {  // "1e3", or beyond any int64
          if (!(std::fabs(*d) < 0x1p63)) return s + " is not allowed: give a whole number " + range;
          v = static_cast<int64_t>(*d);
        }
        if (v < lo || v > hi) return s + " is not allowed: give a whole number " + range;
        s = std::to_string(v);  // for CLI11's conversion, which reads "010" as octal and "1e3" not at all
        return "";
      },
      help_words(range));
}

namespace {
CLI::Validator number_check(double lo, double hi, bool above) {
  const std::string range = above ? "above " + plain(lo)
                            : std::isinf(hi) ? "of at least " + plain(lo)
                                             : "from " + plain(lo) + " to " + plain(hi);
  return CLI::Validator(
      [lo, hi, above, range](std::string& s) -> std::string {
        const std::optional<double> v = parse_number(s);
        if (!v) return in_quotes(s) + " is not a number: give one " + range;
        if (above ? !(*v > lo) : (*v < lo || *v > hi)) return s + " is not allowed: give a number " + range;
        return "";
      },
      help_words(range));
}
}  // namespace

CLI::Validator number(double lo, double hi) { return number_check(lo, hi, false); }

CLI::Validator number_above(double lo) { return number_check(lo, std::numeric_limits<double>::infinity(), true); }

CLI::Validator one_of(std::vector<std::string> words) {
  std::string list;
  for (size_t i = 0; i < words.size(); ++i) list += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return CLI::Validator(
      [words, list](std::string& s) -> std::string {
        for (const std::string& w : words)
          if (s == w) return "";
        return in_quotes(s) + " is not allowed: give " + list;
      },
      list);
}

void record_command_line(int argc, char** argv) { command_line_words().assign(argv, argv + argc); }

const std::vector<std::string>& recorded_command_line() { return command_line_words(); }

void register_commands(CLI::App& app) {
  app.formatter(std::make_shared<WordsHelp>());
  registry() = {add_run(app), add_logits(app), add_make_model(app), add_inspect(app), add_tokenize(app),
                add_setup(app), add_prefetch(app), add_doctor(app), add_serve(app), add_trace_plot(app),
                add_bench(app), add_bench_chart(app), add_cache_sim(app), add_devices(app)};
}

int run_selected(CLI::App& /*app*/) {
  for (const Command& c : registry())
    if (c.app->parsed()) return c.run();
  return 2;
}

}  // namespace deltafin::cli
