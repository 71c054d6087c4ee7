#include "model/deepseek_v3/make_checkpoint.h"

#include "model/deepseek_v3/generator.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/strformat.h"

namespace deltafin {

std::string make_deepseek_v3_checkpoint(const MakeCheckpointRequest& a) {
  const DimOverrides& d = a.dims;
  if (d.latent) fail("make-model --arch deepseek_v3: --latent is K3's routed-expert latent; this family has none");
  const DeepseekV3Flavor flavor = parse_deepseek_v3_flavor(a.flavor);
  DeepseekV3GenerateOptions o;
  o.out_dir = a.out;
  o.seed = a.seed;
  o.flavor = flavor;
  o.dims = deepseek_v3_preset(a.preset, flavor);
  o.dims.hidden = d.hidden.value_or(o.dims.hidden);
  o.dims.layers = d.layers.value_or(o.dims.layers);
  o.dims.experts = d.experts.value_or(o.dims.experts);
  o.dims.top_k = d.top_k.value_or(o.dims.top_k);
  o.dims.vocab = d.vocab.value_or(o.dims.vocab);
  o.dims.moe_intermediate = d.moe_intermediate.value_or(o.dims.moe_intermediate);
  o.dims.intermediate = d.intermediate.value_or(o.dims.intermediate);
  o.shard_bytes = a.shard_bytes;
  o.force = a.force;
  o.progress = a.progress;
  const DeepseekV3GenerateResult r = generate_deepseek_v3_checkpoint(o);
  const DeepseekV3Dims& m = o.dims;
  const bool int4 = deepseek_v3_release(flavor).int4_experts;
  return strformat("wrote %s: DeepSeek-V3 family, flavor %s (model_type %s), preset %s, seed %llu\n", a.out.c_str(),
                   deepseek_v3_flavor_name(flavor), r.config.at("model_type").get<std::string>().c_str(),
                   a.preset.c_str(), static_cast<unsigned long long>(a.seed)) +
         strformat("  %lld layers (%lld dense)%s, %lld experts (top-%lld; n_group %lld, topk_group %lld), hidden %lld, "
                   "q_lora_rank %s\n",
                   static_cast<long long>(m.layers), static_cast<long long>(m.dense_layers),
                   m.mtp ? " + the MTP layer" : "", static_cast<long long>(m.experts), static_cast<long long>(m.top_k),
                   static_cast<long long>(m.n_group), static_cast<long long>(m.topk_group),
                   static_cast<long long>(m.hidden), m.q_lora ? std::to_string(m.q_lora).c_str() : "null") +
         strformat("  %zu tensors in %d shards, %s of weights; routed experts %s, %llu bytes each, %.2f s\n", r.tensors,
                   r.shards, human_bytes(static_cast<double>(r.payload_bytes)).c_str(),
                   int4 ? "INT4 (compressed-tensors, group 32), the rest BF16" : "FP8 e4m3 with 128x128 block scales",
                   static_cast<unsigned long long>(deepseek_v3_expert_bytes(flavor, m)), r.seconds) +
         "  the weights are random: this checkpoint has the architecture and file layout, not the knowledge\n";
}

}  // namespace deltafin
