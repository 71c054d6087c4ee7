#include "model/qwen3/qwen3_generator.h"
#include "util/error.h"
#include "util/strformat.h"

namespace deltafin {

std::string make_qwen3_checkpoint(const MakeCheckpointRequest& a) {
  const DimOverrides& d = a.dims;
  if (d.experts || d.top_k || d.latent || d.moe_intermediate)
    fail("make-model --arch qwen3: a dense model has no experts; only --hidden, --layers, --vocab, --intermediate apply");
  Qwen3GenerateOptions o;
  o.out_dir = a.out;
  o.seed = a.seed;
  o.hidden = d.hidden.value_or(o.hidden);
  o.layers = d.layers.value_or(o.layers);
  o.vocab = d.vocab.value_or(o.vocab);
  o.intermediate = d.intermediate.value_or(o.intermediate);
  o.force = a.force;
  const Qwen3GenerateResult r = generate_qwen3_checkpoint(o);
  return strformat("wrote %s: Qwen3 dense draft model, seed %llu, %lld layers, hidden %lld, %lld heads (%lld kv), vocab %lld\n",
                   a.out.c_str(), static_cast<unsigned long long>(a.seed),
                   static_cast<long long>(r.config.num_hidden_layers), static_cast<long long>(r.config.hidden_size),
                   static_cast<long long>(r.config.num_attention_heads),
                   static_cast<long long>(r.config.num_key_value_heads), static_cast<long long>(r.config.vocab_size)) +
         "  the weights are random: this model has Qwen3's architecture and file layout, not its knowledge\n";
}

}  // namespace deltafin
