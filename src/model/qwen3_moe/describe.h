// `deltafin inspect` for a Qwen3-MoE checkpoint: every tensor's dtype and
// shape checked from the headers (nothing read: a Qwen3-235B-A22B spine is
// 10 GB), then its layers, sizes and session memory; `verify` also reads
// every expert record.
#pragma once

#include <string>

namespace deltafin {

void describe_qwen3_moe_checkpoint(const std::string& dir, bool verify);

}  // namespace deltafin
