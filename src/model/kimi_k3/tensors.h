// The tensors a K3-architecture checkpoint must hold (k3-model.md §3), derived
// from the config: one list that the checkpoint binder checks against and the
// small-checkpoint generator writes, so the two cannot drift apart.
#pragma once

#include <string>
#include <vector>

#include "model/kimi_k3/config.h"
#include "format/safetensors_writer.h"

namespace deltafin {

inline constexpr const char* kK3Prefix = "language_model.";

std::string k3_layer_tensor(int64_t layer, const std::string& suffix);  // language_model.model.layers.{i}.suffix
std::string k3_expert_tensor(int64_t layer, int64_t expert, const char* matrix /*w1|w2|w3*/, bool scale);

// Every language_model.* tensor, in checkpoint order: globals, then layer by
// layer (spine tensors, then experts 0..E-1 each as w1 packed/scale, w2 ..., w3 ...).
// `kda_gate_rank` is r_f, the rank of f_a_proj (not in config.json; the
// binder reads it from the checkpoint, the generator uses head_dim).
std::vector<TensorSpec> k3_language_tensors(const K3Config& c, int64_t kda_gate_rank);

// The six tensors of one routed expert, in record order (§5.1).
std::vector<TensorSpec> k3_expert_tensors(const K3Config& c, int64_t layer, int64_t expert);
uint64_t k3_expert_record_bytes(const K3Config& c);

}  // namespace deltafin
