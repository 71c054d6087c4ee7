#include "spec/drafter_factory.h"

#include <cctype>
#include <filesystem>

#include "spec/ngram_drafter.h"
#include "spec/replay_drafter.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

namespace {

// Comma- or whitespace-separated ids, as --tokens-out writes them.
std::vector<uint32_t> read_token_file(const std::string& path, int64_t vocab) {
  const std::string text = read_text_file(path);
  std::vector<uint32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (ch == ',' || std::isspace(ch)) {
      ++i;
      continue;
    }
    if (!std::isdigit(ch)) fail(path, ": byte ", i, " ('", text[i], "') is not part of a token id list");
    uint64_t v = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      v = v * 10 + static_cast<uint64_t>(text[i] - '0');
      if (v >= static_cast<uint64_t>(vocab)) fail(path, ": token id at byte ", i, " is outside the vocabulary of ", vocab);
      ++i;
    }
    ids.push_back(static_cast<uint32_t>(v));
  }
  if (ids.empty()) fail(path, ": no token ids");
  return ids;
}

}  // namespace

std::unique_ptr<Drafter> make_drafter(const std::string& spec, const LoadedK3& model, const std::vector<uint32_t>& prompt) {
  if (spec == "none") return nullptr;
  if (spec == "ngram") return std::make_unique<NgramDrafter>();
  if (spec.rfind("replay:", 0) == 0) {
    const std::string path = spec.substr(7);
    if (!std::filesystem::is_regular_file(path)) fail("--draft ", spec, ": ", path, " is not a file (give a run's --tokens-out)");
    std::vector<uint32_t> expected = prompt;
    const std::vector<uint32_t> out = read_token_file(path, model.config.vocab_size);
    expected.insert(expected.end(), out.begin(), out.end());
    return std::make_unique<ReplayDrafter>(std::move(expected));
  }
  fail("--draft ", spec, ": unknown drafter (none, ngram, replay:FILE)");
}

}  // namespace deltafin
