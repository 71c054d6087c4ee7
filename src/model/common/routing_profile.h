// Routing profiles for benchmark checkpoints (`make-model --routing-profile`,
// issue 35): random routers make every expert equally likely, so no cache
// policy can beat cache size / bank size. A profile gives a generated
// checkpoint's routers a target expert popularity per MoE layer and a
// temporal locality, by changing three kinds of generated tensor and nothing
// else (the runtime's loading, layout and numerics are untouched):
//   - each MoE layer's router rows (K3 `block_sparse_moe.gate.weight`,
//     Qwen3-MoE `mlp.gate.weight`): row e is multiplied by s_e >= 0. With
//     logits z_e = s_e g_e and g roughly iid N(0, 1) across experts, an
//     expert's top-k frequency rises monotonically with s_e; which experts are
//     hot is a seeded permutation per layer;
//   - K3's `e_score_correction_bias` (selection-only) is zero, so the row
//     scales alone set the popularity (the random bias is itself a skew);
//   - attention weights, per family (LocalityGains): the router input is
//     made more persistent from token to token by giving more weight to an
//     attention output close to a running mean over past positions (Qwen3-MoE:
//     o_proj x gain; K3: the MLA's q_b_proj and output gate g_proj scaled down
//     so its attention is nearly uniform, its o_proj x gain, the KDA o_proj,
//     whose output follows the current query, scaled down).
// The profile `uniform` changes nothing (no shaper is made): its checkpoints
// are byte-identical to ones made without the option.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace deltafin {

// How a family's attention is changed for locality (the factors differ by
// family: the same gain moves K3's and Qwen3-MoE's routes very differently).
struct LocalityGains {
  double attention = 1;  // softmax attention's output projections (K3's MLA, Qwen3's GQA)
  // Linear attention's output projections (K3's KDA): their output S_t q_t
  // follows the current token's query, so it adds token-to-token noise.
  double linear = 1;
  // The family's query tensors of softmax attention (K3: the MLA's q_b_proj
  // and its output gate g_proj): near 0 the attention is nearly uniform, so
  // its output is close to the running mean of the values, which changes by
  // about 1/t per step, and the output gate is close to 0.5 everywhere.
  double query = 1;
};

struct RoutingProfile {
  std::string name;
  std::string what;  // one line for the help and the config record
  // Target coverage curve: (x, y) = the hottest share x of the experts in
  // `span` serves the share y of the routes; increasing, concave, ending at
  // (1, 1). Empty: every expert equally popular (all s_e = 1).
  std::vector<std::pair<double, double>> coverage;
  // The experts the curve is over, in units of top-k: 0 = all E experts
  // (x = rank / E); n > 0: x = rank / (n k), so hit rates at k and 3k slots
  // carry over between shapes (olmoe-like: OLMoE's 64 / 8 = 8). Experts
  // beyond the span get the popularity `tail`.
  double span = 0;
  double tail = 0;  // popularity of an expert past the span, relative to the mean of the span's
  LocalityGains k3, qwen3_moe;
};

// The named profiles, uniform first.
const std::vector<RoutingProfile>& routing_profiles();
std::vector<std::string> routing_profile_names();
// The profile of that name; an unknown name fails naming the valid ones.
const RoutingProfile& routing_profile(const std::string& name);

// Target per-rank selection frequencies (per position, summing to top_k),
// hottest first, for a layer of `experts` experts.
std::vector<double> target_popularity(const RoutingProfile& p, int64_t experts, int64_t top_k);

// Row scales s for ranks (hottest first) whose top-k frequency under
// z_e = s_e g_e, g iid N(0, 1), approximates `popularity`: the fixed-threshold
// solution s = 1 / Qinv(p) (Q the normal tail), refined by seeded Monte
// Carlo rounds. Deterministic for a seed.
std::vector<double> fit_row_scales(const std::vector<double>& popularity, int64_t top_k, uint64_t seed);

// What one profile changes in one checkpoint: per-layer router row scales
// (a seeded permutation of the fitted scales) and the attention gain.
class RoutingShaper {
public:
  // `router_suffix`: the router tensor's name after "layers.<i>." (e.g.
  // "mlp.gate.weight"); `bias_suffix`: a selection bias to zero, or empty.
  // `gains`: the family's locality factors; `query_suffixes`: the tensors
  // `gains.query` scales (in softmax-attention layers only); `linear_layers`:
  // the layers whose attention is linear (K3's KDA).
  RoutingShaper(const RoutingProfile& profile, LocalityGains gains, int64_t experts, int64_t top_k, uint64_t seed,
                std::string router_suffix, std::string bias_suffix, std::vector<std::string> query_suffixes = {},
                std::vector<int64_t> linear_layers = {});
  // Per-row factors for a tensor with `rows` rows: s of its layer for a
  // router, the family's gain for an o_proj or query tensor, 0 for the
  // selection bias; empty:
  // the tensor is written as without a profile.
  std::vector<double> row_factors(const std::string& tensor_name, uint64_t rows) const;
  // The row scales of MoE layer `layer` (expert order).
  std::vector<double> layer_scales(int64_t layer) const;
  // The config record "deltafin_routing_profile" for these MoE layers.
  nlohmann::json record(const std::vector<int64_t>& moe_layers) const;
  const RoutingProfile& profile() const { return profile_; }

private:
  RoutingProfile profile_;
  LocalityGains gains_;
  int64_t experts_, top_k_;
  uint64_t seed_;
  std::string router_suffix_, bias_suffix_;
  std::vector<std::string> query_suffixes_;
  std::vector<int64_t> linear_layers_;
  std::vector<double> ranked_;  // fitted scales, hottest first
};

// The line make-model prints about a profile ("" for uniform).
std::string routing_profile_line(const std::string& name);

// The config.json key of the record.
inline constexpr const char* kRoutingProfileKey = "deltafin_routing_profile";

// The layer index in a tensor name "...layers.<i>.<rest>" whose rest is
// `suffix`; nullopt otherwise.
std::optional<int64_t> layer_of(const std::string& tensor_name, const std::string& suffix);

}  // namespace deltafin
