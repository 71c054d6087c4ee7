// DSpark as a Drafter: the checkpoint is loaded once (DSparkAssets, shared by
// every request), each request gets its own DSparkModel whose context is that
// request's accepted target rows.
//
// The drafter proposes only while its context is exactly the target's
// session (context rows == positions the target ran); a session restored
// from the server's prompt cache skipped rows DSpark never saw, so such a
// request is drafted by nothing rather than by a drafter out of step. Per
// k3-model.md §10.2 it also stops at 8,192 context rows.
#pragma once

#include <memory>
#include <string>

#include "model/k3_dspark/model.h"
#include "model/kimi_k3/load/loaded_k3.h"
#include "speculative/drafter.h"

namespace deltafin {

struct DSparkAssets {
  DSparkConfig config;
  DSparkWeights weights;
  const LoadedK3* target = nullptr;
  // Reads DIR/config.json and DIR's safetensors, checked against the target
  // (a Kimi K3 model: an error names the family otherwise).
  static std::shared_ptr<const DSparkAssets> load(const std::string& dir, LoadedModel& target);
};

class DSparkDrafter : public Drafter {
public:
  static constexpr int64_t kMaxContext = 8192;
  explicit DSparkDrafter(std::shared_ptr<const DSparkAssets> assets);
  std::string name() const override { return "dspark"; }
  std::vector<uint32_t> propose(std::span<const uint32_t> history, int k) override;
  void committed(const Rows& captured, size_t rows) override;
  std::vector<int64_t> capture_layers() const override { return assets_->config.target_layer_ids; }

private:
  std::shared_ptr<const DSparkAssets> assets_;
  DSparkModel model_;
  bool off_ = false;  // out of step with the target, or past kMaxContext: no more drafts or context
};

}  // namespace deltafin
