#include "model/kimi_k3/pinned.h"

#include <filesystem>

#include "util/sha256.h"

namespace deltafin {

namespace {
struct PinnedFile {
  const char* name;
  uint64_t bytes;
  const char* sha256;
};
constexpr PinnedFile kPinned[] = {
    {"config.json", 7006, "9710e121a58d03ac92c8d6da287a19541994319afbbe6d6202af001ffd379213"},
    {"generation_config.json", 53, "c6648c25e9705af7fba8847e243840d21b5cc63ddeb6297f750a7ddbb6a02836"},
    {"tokenizer_config.json", 3478, "5d0803c94db9cd78763499e0956c95fd5a225c14a727e5a6cf5db3f96f010a6e"},
    {"tiktoken.model", 2795286, "b6c497a7469b33ced9c38afb1ad6e47f03f5e5dc05f15930799210ec050c5103"},
    {"LICENSE", 3065, "20c797ce19af0c17de52c6afb144644768a591c521655f5ebf5712c9850f2887"},
};
}  // namespace

bool matches_pinned_k3(const std::string& dir) {
  namespace fs = std::filesystem;
  for (const PinnedFile& f : kPinned) {
    fs::path p = fs::path(dir) / f.name;
    std::error_code ec;
    // Size first: hashing is only worth it for a file that could match.
    if (!fs::exists(p, ec) || fs::file_size(p, ec) != f.bytes) return false;
    if (sha256_file_hex(p.string()) != f.sha256) return false;
  }
  return true;
}

std::string describe_checkpoint_identity(const std::string& dir) {
  return matches_pinned_k3(dir) ? "Kimi K3 (pinned revision)" : "K3-architecture checkpoint";
}

}  // namespace deltafin
