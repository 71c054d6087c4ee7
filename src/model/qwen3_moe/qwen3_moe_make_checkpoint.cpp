#include <algorithm>

#include "model/common/routing_profile.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/strformat.h"

namespace deltafin {

std::string make_qwen3_moe_checkpoint(const MakeCheckpointRequest& a) {
  const DimOverrides& d = a.dims;
  if (d.latent) fail("make-model --arch qwen3_moe: --latent is K3's routed-expert latent; Qwen3-MoE has none");
  if (a.preset == "k3") fail("make-model --arch qwen3_moe: --preset is tiny, small or bench");
  Qwen3MoeGenerateOptions o;
  o.out_dir = a.out;
  o.seed = a.seed;
  o.force = a.force;
  o.dims = qwen3_moe_preset(a.preset);
  o.dims.hidden = d.hidden.value_or(o.dims.hidden);
  o.dims.layers = d.layers.value_or(o.dims.layers);
  o.dims.experts = d.experts.value_or(o.dims.experts);
  o.dims.top_k = d.top_k.value_or(o.dims.top_k);
  o.dims.vocab = d.vocab.value_or(o.dims.vocab);
  o.dims.moe_intermediate = d.moe_intermediate.value_or(o.dims.moe_intermediate);
  o.dims.intermediate = d.intermediate.value_or(o.dims.intermediate);
  if (!a.script.empty()) o.script = ScriptedOutput{a.script};
  o.routing_profile = a.routing_profile;
  // About one shard per a.shard_bytes (--shard-mb), at least two, as released checkpoints are sharded.
  Qwen3MoeConfig probe;
  probe.base.hidden_size = o.dims.hidden;
  probe.moe_intermediate_size = o.dims.moe_intermediate;
  const uint64_t expert_bytes = static_cast<uint64_t>(o.dims.layers) * o.dims.experts * 3 * probe.expert_tensor_bytes();
  o.shards = static_cast<int>(std::max<uint64_t>(2, expert_bytes / std::max<uint64_t>(a.shard_bytes, 1) + 1));
  const Qwen3MoeGenerateResult r = generate_qwen3_moe_checkpoint(o);
  const Qwen3MoeConfig& c = r.config;
  return strformat("wrote %s: Qwen3-MoE preset %s, seed %llu, %lld layers (%zu MoE), %lld experts (top-%lld), hidden %lld\n",
                   a.out.c_str(), a.preset.c_str(), static_cast<unsigned long long>(a.seed),
                   static_cast<long long>(c.base.num_hidden_layers), c.moe_layers().size(),
                   static_cast<long long>(c.num_experts), static_cast<long long>(c.num_experts_per_tok),
                   static_cast<long long>(c.base.hidden_size)) +
         strformat("  %zu tensors in %d shards, %s of weights (expert record %llu bytes)\n", r.tensors, o.shards,
                   human_bytes(static_cast<double>(r.payload_bytes)).c_str(),
                   static_cast<unsigned long long>(c.expert_record_bytes())) +
         (a.script.empty()
              ? "  the weights are random: this checkpoint has Qwen3-MoE's architecture and file layout, not its knowledge\n"
              : strformat("  scripted: after the generation prompt its greedy output is the %zu tokens of --script\n",
                          a.script.size())) +
         routing_profile_line(a.routing_profile);
}

}  // namespace deltafin
