#include "model/common/routing_profile.h"
#include "model/kimi_k3/generator.h"
#include "model/kimi_k3/tensors.h"
#include "util/progress.h"
#include "util/strformat.h"

namespace deltafin {

std::string make_k3_checkpoint(const MakeCheckpointRequest& a) {
  GenerateOptions o;
  o.out_dir = a.out;
  o.seed = a.seed;
  o.dims = apply_overrides(preset_dims(a.preset), a.dims);
  o.shard_bytes = a.shard_bytes;
  o.force = a.force;
  o.progress = a.progress;
  o.routing_profile = a.routing_profile;
  GenerateResult r = generate_k3_checkpoint(o);
  const K3Config& c = r.config;
  return strformat("wrote %s: preset %s, seed %llu, %d layers, %lld experts (top-%lld), hidden %lld\n", a.out.c_str(),
                   a.preset.c_str(), static_cast<unsigned long long>(a.seed), static_cast<int>(c.num_hidden_layers),
                   static_cast<long long>(c.num_experts), static_cast<long long>(c.num_experts_per_token),
                   static_cast<long long>(c.hidden_size)) +
         strformat("  %zu tensors in %d shards, %s of weights (expert record %llu bytes), %.2f s\n", r.tensors, r.shards,
                   human_bytes(static_cast<double>(r.payload_bytes)).c_str(),
                   static_cast<unsigned long long>(k3_expert_record_bytes(c)), r.seconds) +
         "  the weights are random: this checkpoint has the K3 architecture and file layout, not its knowledge\n" +
         routing_profile_line(a.routing_profile);
}

}  // namespace deltafin
