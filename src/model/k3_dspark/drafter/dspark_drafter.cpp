#include "model/k3_dspark/drafter/dspark_drafter.h"

#include <algorithm>
#include <filesystem>

#include "util/error.h"

namespace deltafin {

std::shared_ptr<const DSparkAssets> DSparkAssets::load(const std::string& dir, LoadedModel& target_model) {
  const LoadedK3& target = require_k3(target_model, "--draft dspark:DIR");
  auto a = std::make_shared<DSparkAssets>();
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  a->config = read_dspark_config(config_path);
  validate_dspark_for_target(a->config, target.config, config_path);
  a->weights = load_dspark_weights(dir, a->config);
  a->target = &target;
  return a;
}

DSparkDrafter::DSparkDrafter(std::shared_ptr<const DSparkAssets> assets)
    : assets_(std::move(assets)),
      model_(assets_->config, assets_->weights, assets_->target->weights, assets_->target->pool.get()) {}

std::vector<uint32_t> DSparkDrafter::propose(std::span<const uint32_t> history, int k) {
  // The anchor (history's last token) is not in the target's session yet.
  const int64_t target_rows = static_cast<int64_t>(history.size()) - 1;
  if (target_rows != model_.context_length() || target_rows >= kMaxContext) off_ = true;
  if (off_ || k <= 0) return {};
  return model_.propose(history.back(), std::min(k, 7)).tokens;
}

void DSparkDrafter::committed(const Rows& captured, size_t rows) {
  if (off_ || model_.context_length() + static_cast<int64_t>(rows) > kMaxContext) {
    off_ = true;  // past the limit the context is no longer kept: nothing more to draft with
    return;
  }
  if (captured.T < rows) fail("dspark: ", rows, " rows committed but only ", captured.T, " captured");
  model_.append_context(captured, rows);
}

}  // namespace deltafin
