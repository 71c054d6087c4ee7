// deltafin cache-sim: a route trace (--route-trace) replayed through the
// expert cache at several sizes, for each eviction policy and for Belady's
// optimum (experts/cache_sim.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "experts/cache_sim.h"
#include "util/error.h"
#include "util/file.h"
#include "util/strformat.h"

namespace deltafin::cli {

namespace {

struct CacheSimArgs {
  std::vector<std::string> traces;
  std::string heat_from, slots, fractions, policies = "lru,frequency,cycle-heat,cycle-reuse", json;
  double pinned_fraction = 0;
  bool with_prefill = false;
  int threads = 0;
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = list.find(',', at);
    out.push_back(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

// "--slots 16,64,256" or "--fractions 0.01,0.05" of the bank (MoE layers x experts).
std::vector<size_t> cache_sizes(const CacheSimArgs& a, const CacheReplay& r) {
  if (a.slots.empty() == a.fractions.empty()) fail("give exactly one of --slots or --fractions");
  const bool by_fraction = !a.fractions.empty();
  const std::string option = by_fraction ? "--fractions" : "--slots";
  const double bank = static_cast<double>(r.moe_layers.size()) * static_cast<double>(r.experts);
  std::vector<size_t> sizes;
  for (const std::string& item : split(by_fraction ? a.fractions : a.slots)) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !std::isfinite(v) || v <= 0 || (!by_fraction && v != std::floor(v)))
      fail(option, ": \"", item, "\" is not ", by_fraction ? "a fraction above 0" : "a whole number of slots above 0",
           " (a list: ", by_fraction ? "0.01,0.05,0.1" : "16,64,256", ")");
    const size_t slots = by_fraction ? static_cast<size_t>(std::llround(v * bank)) : static_cast<size_t>(v);
    check_cache_size(r, slots, a.pinned_fraction,
                     by_fraction ? cat(option, " ", item, " (", slots, " of the bank's ", bank, " experts)")
                                 : cat(option, " ", item));
    sizes.push_back(slots);
  }
  return sizes;
}

// "auto" becomes the policy the engine's rule picks from `heat` (the
// starting heat, as a run starts from heat.json); `why` says which and why.
std::vector<CachePolicyKind> policy_list(const std::string& list, const HeatHistogram* heat, const CacheReplay& r,
                                         std::string* why) {
  std::vector<CachePolicyKind> out;
  for (const std::string& name : split(list)) {
    if (name != "auto") {
      out.push_back(parse_cache_policy(name, "--policies"));
      continue;
    }
    const AutoPolicyChoice c = choose_cache_policy(heat, r.top_k, r.experts);
    out.push_back(c.kind);
    *why = "auto is " + cache_policy_name(c.kind) + ": " + c.why + " in the starting heat";
  }
  return out;
}

CacheReplay read_replay(const std::vector<std::string>& paths) {
  std::vector<RouteTrace> traces;
  for (const std::string& p : paths) traces.push_back(read_route_trace(p));
  return make_replay(traces, paths);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

void print_summary(const RouteTraceSummary& t, const CacheReplay& r, const std::vector<std::string>& traces,
                   bool with_prefill) {
  std::printf("trace: %s: %lld decode tokens", joined(traces).c_str(), static_cast<long long>(t.decode_tokens));
  if (t.prefill_passes)
    std::printf(" and %lld prefill passes of %lld positions (%s)", static_cast<long long>(t.prefill_passes),
                static_cast<long long>(t.prefill_positions), with_prefill ? "replayed" : "not replayed");
  std::printf("; %lld MoE layers x %lld experts, top-k %lld; bank %lld experts\n", static_cast<long long>(t.moe_layers),
              static_cast<long long>(t.experts), static_cast<long long>(t.top_k),
              static_cast<long long>(t.moe_layers * t.experts));
  std::vector<double> cover[4], reuse;
  for (const RouteTraceSummary::Layer& l : t.layers) {
    for (int q = 0; q < 4; ++q) cover[q].push_back(l.coverage[q]);
    if (l.reuse >= 0) reuse.push_back(l.reuse);
  }
  auto range = [](const std::vector<double>& v) {
    if (v.empty()) return std::string("-");
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return strformat("%.1f %% (layers %.1f to %.1f)", 100 * mean_of(v), 100 * *lo, 100 * *hi);
  };
  std::printf("coverage: the share of a layer's experts serving 50 / 80 / 90 / 95 %% of its decode routes, "
              "mean over layers: %.1f / %.1f / %.1f / %.1f %%\n",
              100 * mean_of(cover[0]), 100 * mean_of(cover[1]), 100 * mean_of(cover[2]), 100 * mean_of(cover[3]));
  std::printf("  90 %% of routes: %s\n", range(cover[2]).c_str());
  std::printf("temporal reuse: the share of a token's experts at a layer the token before used there too: %s "
              "(uniform routing: top-k / experts = %.1f %%)\n",
              range(reuse).c_str(), 100.0 * static_cast<double>(r.top_k) / static_cast<double>(r.experts));
}

// Each size's rows end with Belady's: its hit rate is the reference of that size's rows.
std::vector<double> belady_of(const std::vector<CacheSimRow>& rows) {
  std::vector<double> out(rows.size(), 0.0);
  double reference = 0;
  for (size_t i = rows.size(); i-- > 0;) {
    if (rows[i].policy == "belady") reference = rows[i].hit_rate();
    out[i] = reference;
  }
  return out;
}

double misses_per_token(const CacheSimRow& w, int64_t tokens) {
  return static_cast<double>(w.demanded - w.hits) / static_cast<double>(tokens);
}

void print_table(const std::vector<CacheSimRow>& rows, int64_t tokens, bool with_prefill) {
  std::printf("\n%8s %7s  %-12s %7s %13s %12s%s\n", "slots", "pinned", "policy", "hit %", "misses/token",
              "Belady gap", with_prefill ? "  prefill hit %" : "");
  const std::vector<double> belady = belady_of(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const CacheSimRow& w = rows[i];
    const double misses = misses_per_token(w, tokens);
    const std::string gap = w.policy == "belady" ? "-" : strformat("%.2f", 100 * (belady[i] - w.hit_rate()));
    std::printf("%8zu %7zu  %-12s %7.2f %13.1f %12s", w.slots, w.pinned, w.policy.c_str(), 100 * w.hit_rate(), misses,
                gap.c_str());
    if (with_prefill)
      std::printf("  %14.2f", w.prefill_demanded ? 100.0 * static_cast<double>(w.prefill_hits) /
                                                       static_cast<double>(w.prefill_demanded)
                                                 : 0.0);
    std::printf("\n");
  }
}

nlohmann::ordered_json to_json(const CacheSimArgs& a, const RouteTraceSummary& t, const std::vector<CacheSimRow>& rows,
                               const std::string& heat) {
  nlohmann::ordered_json j;
  j["traces"] = a.traces;
  j["heat"] = heat;
  j["pinned_fraction"] = a.pinned_fraction;
  j["with_prefill"] = a.with_prefill;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const RouteTraceSummary::Layer& l : t.layers)
    layers.push_back({{"layer", l.layer},
                      {"coverage_50", l.coverage[0]},
                      {"coverage_80", l.coverage[1]},
                      {"coverage_90", l.coverage[2]},
                      {"coverage_95", l.coverage[3]},
                      {"reuse", l.reuse < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(l.reuse)}});
  j["summary"] = {{"decode_tokens", t.decode_tokens}, {"prefill_passes", t.prefill_passes},
                  {"prefill_positions", t.prefill_positions}, {"moe_layers", t.moe_layers},
                  {"experts", t.experts}, {"top_k", t.top_k}, {"layers", layers}};
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  const std::vector<double> belady = belady_of(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const CacheSimRow& w = rows[i];
    nlohmann::ordered_json row = {{"slots", w.slots},       {"pinned", w.pinned},
                                  {"policy", w.policy},     {"demanded", w.demanded},
                                  {"hits", w.hits},         {"hit_rate", w.hit_rate()},
                                  {"misses_per_token", misses_per_token(w, t.decode_tokens)},
                                  {"belady_gap_points", 100 * (belady[i] - w.hit_rate())}};
    if (a.with_prefill) row["prefill_demanded"] = w.prefill_demanded, row["prefill_hits"] = w.prefill_hits;
    out.push_back(row);
  }
  j["rows"] = out;
  return j;
}

int run(CacheSimArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> traces;  // each argument may itself be a comma-separated list, as --heat-from is
  for (const std::string& t : a.traces)
    for (const std::string& f : split(t)) traces.push_back(f);
  a.traces = traces;
  const CacheReplay replay = read_replay(a.traces);
  require_decode(replay, joined(a.traces));
  const RouteTraceSummary summary = summarize(replay);
  const std::vector<std::string> heat_from = a.heat_from.empty() ? std::vector<std::string>() : split(a.heat_from);
  if (a.pinned_fraction > 0 && heat_from.empty())
    fail("--pinned-fraction: the pinned tier is filled from the heat; give --heat-from");
  CacheSimOptions o;
  o.slots = cache_sizes(a, replay);
  o.pinned_fraction = a.pinned_fraction;
  o.with_prefill = a.with_prefill;
  o.threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  HeatHistogram heat;
  std::string heat_note = "none (the heat starts empty)";
  if (!heat_from.empty()) {
    const CacheReplay from = read_replay(heat_from);
    if (from.layers != replay.layers || from.experts != replay.experts)
      fail("--heat-from ", joined(heat_from), ": layers=", from.layers, " experts=", from.experts, ", but ",
           joined(a.traces), " has layers=", replay.layers, " experts=", replay.experts, " (traces of one model only)");
    heat = learn_heat(from);
    o.heat = &heat;
    const bool same = heat_from == a.traces;
    heat_note = cat(joined(heat_from), same ? " (in-sample: the trace measured)" : " (held out)", ", ",
                    from.passes.size(), " passes");
  }
  std::string auto_why;
  o.policies = policy_list(a.policies, heat_from.empty() ? nullptr : &heat, replay, &auto_why);
  print_summary(summary, replay, a.traces, a.with_prefill);
  if (!auto_why.empty()) std::printf("%s\n", auto_why.c_str());
  const std::string pinned =
      a.pinned_fraction > 0 ? strformat("%.0f %% of each size pinned to its hottest experts", 100 * a.pinned_fraction)
                            : "no pinned tier";
  std::printf("heat: %s; %s\n", heat_note.c_str(), pinned.c_str());
  const std::vector<CacheSimRow> rows = simulate(replay, o);
  print_table(rows, summary.decode_tokens, a.with_prefill);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n%zu sizes x %zu policies and Belady in %.2f s (%d threads)\n", o.slots.size(), o.policies.size(),
              seconds, o.threads);
  if (!a.json.empty()) {
    write_file_atomic(a.json, to_json(a, summary, rows, heat_note).dump(1) + "\n");
    std::printf("wrote %s\n", a.json.c_str());
  }
  return 0;
}

}  // namespace

Command add_cache_sim(CLI::App& app) {
  auto a = std::make_shared<CacheSimArgs>();
  CLI::App* sub = app.add_subcommand("cache-sim",
                                     "Replay a route trace (--route-trace) through the expert cache: hit rate per size "
                                     "and eviction policy, against Belady's optimum");
  sub->footer(R"(Runs the engine's own expert cache and eviction policies (the code of --cache-policy) over the trace's
decoded tokens, with as many slots as each size, and Belady's optimum over the same sequence: at a miss it
evicts the expert demanded again furthest in the future, never one of the layer being computed (a layer's
experts are all in RAM at once), so no policy can hit more. Several traces of one model are replayed one
after another, as one engine would serve them.
A demand is one (token, MoE layer, routed expert); it hits when the expert is in a slot when its layer asks.
Each layer asks as the engine does: its experts enter the heat, those in a slot are taken first, then a
slot is claimed for each miss (an empty one first, else the policy's victim), all held until the layer is
done. Reads land at once and nothing is prefetched (route lookahead off): the figures are the cache's
alone, what lookahead adds is not in them. The heat starts as --heat-from leaves it (every demand of those
traces added, decayed by 0.999 per position as the engine does; without it, empty) and is fed and decayed
through the replay as in a run; --pinned-fraction F of each size is pinned to the hottest experts of
that starting heat for every policy. Belady has no pinned tier (all its slots are free) and, with one,
starts with as many experts of its choice (those demanded first). --with-prefill replays the prompts'
passes too (a layer's rows as one request; the engine asks 128-row slices, and where a layer's experts
outnumber the free slots it claims the rest as its reads land, which the replay takes as all landed) and
reports their hit rate apart; the table's rate is always the decoded tokens'.
Output: the trace's coverage (the share of each layer's experts that serve 50/80/90/95 % of its decode
routes) and temporal reuse (the share of a token's experts at a layer the token before used too), then per
size and policy: hit %, misses per token, and the gap to Belady in points.)");
  sub->add_option("traces", a->traces,
                  "Route trace files (run --route-trace) of one model, replayed in order (separated by spaces or "
                  "commas)")
      ->required();
  sub->add_option("--slots", a->slots, "Cache sizes in slots (experts), pinned included: a list, e.g. 16,64,256");
  sub->add_option("--fractions", a->fractions,
                  "Cache sizes as fractions of the bank (MoE layers x experts): a list, e.g. 0.01,0.05,0.1,0.5");
  sub->add_option("--policies", a->policies, "Eviction policies to compare, a list of: auto (the engine's default: the policy its rule picks from the starting heat's temporal reuse), " + [] {
    std::string s;
    for (const std::string& n : cache_policy_names()) s += (s.empty() ? "" : ", ") + n;
    return s;
  }())->capture_default_str();
  sub->add_option("--heat-from", a->heat_from,
                  "Route traces (a list) the starting heat is learned from: others for a held-out measure, the "
                  "same for in-sample");
  sub->add_option("--pinned-fraction", a->pinned_fraction,
                  "Share of each size pinned to the hottest experts of the starting heat (needs --heat-from)")
      ->check(number(0, 1))
      ->capture_default_str();
  sub->add_flag("--with-prefill", a->with_prefill, "Replay the passes of several positions (prompts) too");
  sub->add_option("--json", a->json, "Write the summary and every row as JSON to this file");
  sub->add_option("--threads", a->threads, "Sizes and policies simulated at once; 0 = one per core")
      ->transform(whole_number(0, kMaxThreads))
      ->capture_default_str();
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
