#include "model/common/expert_source.h"

#include "util/error.h"
#include "util/weight_memory.h"

namespace deltafin {

// get() blocks until each is there: all of them form one group. The lists
// are the thread's, kept between calls (a decoded token's layers allocate
// nothing here); a call does not nest in another on the same thread.
void ExpertSource::for_each_ready_group(int64_t layer, std::span<const int64_t> experts,
                                        const std::function<void(std::span<const ReadyExpert>)>& use) {
  thread_local std::vector<ExpertHandle> held;
  thread_local std::vector<ReadyExpert> group;
  held.clear();
  group.clear();
  struct Release {  // the records' keep-alives go when the call ends, however it ends
    ~Release() { held.clear(); }
  } release;
  for (size_t i = 0; i < experts.size(); ++i) {
    held.push_back(get(layer, experts[i]));
    group.push_back({i, held.back().data});
  }
  if (!group.empty()) use(group);
}

void ExpertSource::for_each_ready(int64_t layer, std::span<const int64_t> experts,
                                  const std::function<void(size_t, const uint8_t*)>& use) {
  for_each_ready_group(layer, experts, [&](std::span<const ReadyExpert> group) {
    for (const ReadyExpert& r : group) use(r.index, r.record);
  });
}

ResidentExpertSource::ResidentExpertSource(int64_t layers, int64_t experts, std::span<const int64_t> moe_layers,
                                           uint64_t record_bytes, const ReadRecord& read)
    : layers_(layers), experts_(experts) {
  records_.resize(static_cast<size_t>(layers_ * experts_));
  for (int64_t l : moe_layers)
    for (int64_t e = 0; e < experts_; ++e) {
      // Read straight into huge-page-backed memory (util/weight_memory.h):
      // decode streams every routed record once per use.
      WeightBuffer b = alloc_weight_buffer(record_bytes, 64);
      read(l, e, b.get());
      records_[static_cast<size_t>(l * experts_ + e)] = std::shared_ptr<const uint8_t>(b.release(), WeightMemoryFree{});
    }
}

ExpertHandle ResidentExpertSource::get(int64_t layer, int64_t expert) {
  if (layer < 0 || layer >= layers_ || expert < 0 || expert >= experts_ ||
      !records_[static_cast<size_t>(layer * experts_ + expert)])
    fail("no routed expert (layer ", layer, ", expert ", expert, ")");
  const auto& r = records_[static_cast<size_t>(layer * experts_ + expert)];
  return {r.get(), r};
}

}  // namespace deltafin
