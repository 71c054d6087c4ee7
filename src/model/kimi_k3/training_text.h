// The built-in text the small checkpoints' BPE tokenizer is trained on.
#pragma once

#include <string_view>

namespace deltafin {
std::string_view builtin_training_text();
}
