#include "model/kimi_k3/expert_source.h"

#include "format/k3_checkpoint.h"
#include "util/error.h"

namespace deltafin {

void ExpertSource::for_each_ready(int64_t layer, std::span<const int64_t> experts,
                                  const std::function<void(size_t, const uint8_t*)>& use) {
  for (size_t i = 0; i < experts.size(); ++i) {
    ExpertHandle h = get(layer, experts[i]);
    use(i, h.data);
  }
}

ResidentExpertSource::ResidentExpertSource(const K3Checkpoint& k)
    : layers_(k.config.num_hidden_layers), experts_(k.config.num_experts) {
  records_.resize(static_cast<size_t>(layers_ * experts_));
  for (int64_t l = 1; l < layers_; ++l)
    for (int64_t e = 0; e < experts_; ++e)
      records_[static_cast<size_t>(l * experts_ + e)] =
          std::make_shared<const std::vector<uint8_t>>(k.read_expert_record(l, e));
}

ExpertHandle ResidentExpertSource::get(int64_t layer, int64_t expert) {
  if (layer < 1 || layer >= layers_ || expert < 0 || expert >= experts_)
    fail("no routed expert (layer ", layer, ", expert ", expert, ")");
  const auto& r = records_[static_cast<size_t>(layer * experts_ + expert)];
  return {r->data(), r};
}

}  // namespace deltafin
