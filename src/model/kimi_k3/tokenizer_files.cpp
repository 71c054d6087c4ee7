#include "model/kimi_k3/tokenizer_files.h"

#include <filesystem>

#include "format/tiktoken_file.h"
#include "format/tokenizer_config.h"
#include "model/kimi_k3/training_text.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/pretokenizer.h"
#include "util/error.h"
#include "util/file.h"

namespace deltafin {

std::vector<std::string> generated_vocabulary(int64_t n_ranks) {
  if (n_ranks < 257) fail("vocabulary of ", n_ranks, " ranks is too small: 256 byte tokens plus at least one merge");
  Pretokenizer pre(kK3Pattern);
  return train_bpe(builtin_training_text(), static_cast<size_t>(n_ranks - 256), pre);
}

void write_k3_tokenizer_files(const std::string& dir, int64_t n_ranks) {
  namespace fs = std::filesystem;
  std::vector<std::string> vocab = generated_vocabulary(n_ranks);
  if (static_cast<int64_t>(vocab.size()) != n_ranks)
    fail("BPE training produced ", vocab.size(), " ranks, wanted ", n_ranks, " (training text too short?)");
  write_file_atomic((fs::path(dir) / "tiktoken.model").string(), format_tiktoken_ranks(vocab));
  write_file_atomic((fs::path(dir) / "tokenizer_config.json").string(),
                    make_tokenizer_config_json(static_cast<uint32_t>(n_ranks), 1048576));
}

}  // namespace deltafin
