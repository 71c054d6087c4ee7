#include "model/k3_dspark/generator.h"
#include "util/error.h"
#include "util/strformat.h"

namespace deltafin {

// k3-model.md §10.2, §14.
std::string make_dspark_checkpoint(const MakeCheckpointRequest& a) {
  if (a.target.empty()) fail("make-model --arch k3_dspark: --target DIR (the K3 checkpoint to draft for) is required");
  const DimOverrides& d = a.dims;
  if (d.hidden || d.experts || d.top_k || d.vocab || d.latent || d.moe_intermediate || d.intermediate)
    fail("make-model --arch k3_dspark: the dimensions come from --target; only --layers (DSpark layers, 1..5) applies");
  DSparkGenerateOptions o;
  o.layers = d.layers.value_or(0);
  o.force = a.force;
  const DSparkConfig c = generate_dspark_checkpoint(a.target, a.out, a.seed, o);
  std::string out = strformat("wrote %s: DSpark drafter for %s, seed %llu, %lld layers, %lld heads, hidden %lld, capture layers",
                              a.out.c_str(), a.target.c_str(), static_cast<unsigned long long>(a.seed),
                              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.num_attention_heads),
                              static_cast<long long>(c.hidden_size));
  for (int64_t id : c.target_layer_ids) out += strformat(" %lld", static_cast<long long>(id));
  return out + "\n  the weights are random: this drafter has DSpark's architecture and file layout, not its knowledge\n";
}

}  // namespace deltafin
