// deltafin bench: fixed prompts, a warm-up, N measured runs (or A/B runs with
// --vs), median and spread of every metric, a token-equality check; text,
// JSON and SVG. The measuring is bench/bench_runner.h, the output
// bench/bench_report.h; this file is the options.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "bench/bench_runner.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin::cli {

namespace {

struct BenchArgs {
  ModelArgs model;
  std::string prompts, json, svg, vs;
  BenchOptions o;
};

// Words of an option string as a POSIX shell would split them: blanks
// separate, '...' and "..." quote, a backslash escapes the next character
// (outside single quotes). No expansion of any kind.
std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"' && i + 1 < s.size()) cur += s[++i];
      else cur += c;
    } else if (c == '\'' || c == '"') {
      quote = c, in_word = true;
    } else if (c == '\\' && i + 1 < s.size()) {
      cur += s[++i], in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(cur), cur.clear(), in_word = false;
    } else {
      cur += c, in_word = true;
    }
  }
  if (quote) fail("--vs \"", s, "\": unbalanced ", quote, " quote");
  if (in_word) words.push_back(cur);
  return words;
}

// The second configuration: the store options in `text`, parsed by the same
// CLI11 definitions as the command's own (add_model_options) onto a copy of
// the first configuration, so what is not named stays as in A.
ModelArgs parse_vs(const std::string& text, const ModelArgs& base) {
  const std::vector<std::string> words = split_words(text);
  if (words.empty()) fail("--vs is empty: give the second configuration's options, e.g. --vs \"--lookahead off\"");
  ModelArgs b = base;
  CLI::App app{"--vs"};
  add_model_options(&app, b);
  std::vector<std::string> args(words.rbegin(), words.rend());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    fail("--vs \"", text, "\": ", e.what());
  }
  // A different source replaces A's, not joins it.
  if (app.count("--model")) b.store.clear();
  if (app.count("--store")) b.model.clear();
  return b;
}

// The command line as run (recorded by main), for the JSON; words with blanks
// or shell characters in single quotes.
std::string command_line() {
  std::string out;
  for (const std::string& word : recorded_command_line()) {
    const bool plain = !word.empty() && word.find_first_of(" \t\"'\\$`") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? word : "'" + word + "'");
  }
  return out;
}

int run(BenchArgs& a) {
  if (a.model.model.empty() == a.model.store.empty()) fail("give exactly one of --model (checkpoint) or --store (deltafin store)");
  // Checked before any model is loaded (a K3 spine takes minutes).
  std::vector<BenchConfig> configs;
  const std::string source = a.model.store.empty() ? "--model " + a.model.model : "--store " + a.model.store;
  configs.push_back({"A", source + " with the command's options", a.model.store, [m = a.model] { return load_model(m); }});
  if (!a.vs.empty()) {
    const ModelArgs b = parse_vs(a.vs, a.model);
    if (!a.o.cold && !b.store.empty() && (!a.model.cache_gb || !b.cache_gb))
      std::fprintf(stderr, "deltafin: note: both configurations stay loaded, so an automatic cache size (no --cache-gb) is "
                           "planned from the RAM left when it loads (B after A); give --cache-gb for a like-for-like comparison\n");
    configs.push_back({"B", a.vs, b.store, [b] { return load_model(b); }});
  }
  if (!a.prompts.empty() && !file_exists(a.prompts)) fail("--prompts ", a.prompts, ": no such file");
  const std::string prompts_file = a.prompts;
  PromptMaker make_prompts = [prompts_file](LoadedModel& m) {
    if (prompts_file.empty()) return builtin_prompts(m.summary().vocab);
    return read_prompts_file(
        prompts_file, [&m](const std::string& text) { return m.text->encode_ordinary(text); }, m.summary().vocab);
  };
  BenchResult r = run_bench(std::move(configs), make_prompts, a.o,
                            [](const std::string& line) { std::fprintf(stderr, "bench: %s\n", line.c_str()); });
  std::printf("%s", format_bench_report(r).c_str());
  if (!a.json.empty()) {
    write_file_atomic(a.json, bench_json(r, command_line()));
    std::printf("wrote %s\n", a.json.c_str());
  }
  if (!a.svg.empty()) {
    std::vector<std::string> notes;
    for (const std::string& path : write_bench_svgs(r, a.svg, &notes)) std::printf("wrote %s\n", path.c_str());
    for (const std::string& n : notes) std::fprintf(stderr, "deltafin: note: %s\n", n.c_str());
  }
  if (!r.ok()) {
    std::fprintf(stderr, "deltafin: error: %zu run(s) generated different tokens than the first run (see above)\n",
                 r.mismatches.size());
    return 1;
  }
  return 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand(
      "bench", "Measure generation: fixed prompts, warm-up, N runs, median and spread; --vs compares two configurations");
  sub->footer(R"(Repeated measured runs of fixed prompts with median and spread of every metric, a token-equality check
(a run that generates other tokens than the first fails the command), A/B alternation (--vs), cold runs
and SVG pictures. bench-chart draws drive scaling from several --json files. The benchmark scripts and
their figures: bench/README.md and bench/results/README.md.)");
  add_model_options(sub, a->model);
  sub->add_option("--prompts", a->prompts, "One prompt per line: token ids \"1,2,3\" or raw text (default: 3 built-in id prompts)");
  sub->add_option("--runs", a->o.runs, "Measured runs per configuration")->transform(whole_number(1, 100000))->capture_default_str();
  sub->add_option("--warmup", a->o.warmup, "Warm-up runs before them, left out of the figures")
      ->transform(whole_number(0, 100000))
      ->capture_default_str();
  sub->add_option("--max-new", a->o.max_new, "Tokens generated per prompt, past the end of message")
      ->transform(whole_number(1, kMaxTokens))
      ->capture_default_str();
  sub->add_option("--prefill-chunk", a->o.prefill_chunk, "Prompt rows per prefill slice of a layer; 0 = the whole group")
      ->transform(whole_number(0, kMaxPrefillRows))
      ->capture_default_str();
  sub->add_option("--prefill-group", a->o.prefill_group,
                  "Prompt positions per layer-major prefill pass; 0 = as many as 1 GiB of activations holds")
      ->transform(whole_number(0, kMaxTokens))
      ->capture_default_str();
  sub->add_option("--json", a->json, "Write everything measured (per run and summarised) as JSON to this file");
  sub->add_option("--svg", a->svg, "Write PREFIX-drives.svg, PREFIX-steps.svg and PREFIX-hits.svg (last measured run)");
  sub->add_flag("--cold", a->o.cold,
                "Every run loads the model afresh (empty expert cache) after dropping the page cache of the store's expert files");
  sub->add_option("--vs", a->vs,
                  "A second configuration, as store options in one string (e.g. \"--lookahead off --cache-gb 0.5\"); runs "
                  "alternate A B A B and B/A ratios are reported");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
