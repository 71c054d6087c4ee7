#include "model/k3_dspark/generator.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/checkpoint_dir.h"
#include "format/checkpoint.h"
#include "format/safetensors_writer.h"
#include "format/tokenizer_config.h"
#include "model/k3_dspark/weights.h"
#include "util/error.h"
#include "util/file.h"
#include "util/numeric.h"
#include "util/rng.h"

namespace deltafin {

namespace fs = std::filesystem;
using nlohmann::json;

DSparkDims dspark_dims_for_target(const K3Config& t, int64_t layers) {
  if (layers < 0 || layers > 5) fail("DSpark generator: num_hidden_layers ", layers, " is outside 1..5");
  DSparkDims d;
  d.hidden = t.hidden_size;
  if (t.hidden_size == 7168 && t.num_hidden_layers == 93) {  // the released drafter
    d.intermediate = 14336, d.layers = 5, d.heads = 64, d.q_lora = 1536, d.kv_lora = 512;
    d.nope = 128, d.rope = 64, d.v_dim = 128, d.markov_rank = 256;
    d.target_layer_ids = {2, 23, 47, 71, 89};
  } else {
    d.intermediate = 2 * t.hidden_size, d.layers = 2, d.heads = std::max<int64_t>(2, t.hidden_size / 64);
    d.q_lora = t.hidden_size / 2, d.kv_lora = t.hidden_size / 2;
    d.nope = 16, d.rope = 8, d.v_dim = 16, d.markov_rank = 16;
    const int64_t n = std::min<int64_t>(5, t.num_hidden_layers), L = t.num_hidden_layers;
    for (int64_t i = 0; i < n; ++i) d.target_layer_ids.push_back((2 * i + 1) * L / (2 * n));
  }
  if (layers > 0) d.layers = layers;
  return d;
}

json dspark_config_json(const DSparkDims& d, const K3Config& t) {
  const int64_t base = t.reserved_base();
  return json{
      {"architectures", {"K3DSparkModel"}},
      {"model_type", "k3_dspark"},
      {"hidden_size", d.hidden},
      {"intermediate_size", d.intermediate},
      {"num_hidden_layers", d.layers},
      {"num_attention_heads", d.heads},
      {"num_key_value_heads", d.heads},
      {"q_lora_rank", d.q_lora},
      {"kv_lora_rank", d.kv_lora},
      {"qk_nope_head_dim", d.nope},
      {"qk_rope_head_dim", d.rope},
      {"v_head_dim", d.v_dim},
      {"mla_use_nope", false},
      {"mla_use_output_gate", false},
      {"vocab_size", t.vocab_size},
      {"rms_norm_eps", 1e-05},
      {"max_position_embeddings", 1048576},
      {"rope_theta", 50000.0},
      {"num_target_layers", static_cast<int64_t>(d.target_layer_ids.size())},
      {"target_hidden_size", t.hidden_size},
      {"target_num_hidden_layers", t.num_hidden_layers},
      {"target_layer_ids", d.target_layer_ids},
      {"mask_token_id", base + reserved::kMask},
      {"bos_token_id", t.bos_token_id},
      {"eos_token_id", t.eos_token_id},
      {"pad_token_id", t.pad_token_id},
      {"markov_rank", d.markov_rank},
      {"markov_head_type", "vanilla"},
      {"enable_confidence_head", true},
      {"confidence_head_with_markov", true},
      {"tie_word_embeddings", false},
      {"draft_vocab_size", t.vocab_size},
      {"_torchspec_version", "0.1.0"},
      {"torch_dtype", "bfloat16"},
      {"rope_parameters",
       {{"rope_type", "yarn"},
        {"factor", 32.0},
        {"original_max_position_embeddings", 32768},
        {"rope_theta", 50000.0},
        {"beta_fast", 32},
        {"beta_slow", 1},
        {"mscale", 1.0},
        {"mscale_all_dim", 1.0}}},
  };
}

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Streams one random tensor into the writer in chunks of at most 4 MiB.
// Norm weights 1 ± 0.1; markov_w1 (a per-token table) N(0, 1) so the Markov
// bias is of order 1 like the logits; every projection std 1/sqrt(fan-in),
// which keeps each output's scale equal to its input's.
void write_random(SafetensorsWriter& w, const DSparkTensor& t, uint64_t seed) {
  Rng rng(seed ^ fnv1a64(t.name));
  uint64_t elements = 1;
  for (uint64_t s : t.shape) elements *= s;
  double mean = 0, sd = 1.0;
  if (contains(t.name, "norm")) {
    mean = 1.0, sd = 0.1;
  } else if (contains(t.name, ".bias")) {
    sd = 0.1;
  } else if (contains(t.name, "markov_w1")) {
    sd = 1.0;
  } else {
    sd = 1.0 / std::sqrt(static_cast<double>(t.shape.back()));
  }
  std::vector<uint8_t> buf;
  uint64_t done = 0;
  while (done < elements) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(elements - done, 2u << 20));
    buf.resize(2 * n);
    for (size_t i = 0; i < n; ++i) {
      uint16_t b = f32_to_bf16(static_cast<float>(mean + sd * rng.normal()));
      buf[2 * i] = static_cast<uint8_t>(b), buf[2 * i + 1] = static_cast<uint8_t>(b >> 8);
    }
    w.append(buf.data(), buf.size());
    done += n;
  }
}

// The target's embedding, byte for byte, in chunks.
void copy_tensor(SafetensorsWriter& w, const TensorRef& src) {
  std::vector<uint8_t> buf;
  const uint64_t total = src.info->bytes();
  for (uint64_t off = 0; off < total;) {
    const uint64_t n = std::min<uint64_t>(total - off, 4u << 20);
    buf.resize(static_cast<size_t>(n));
    src.shard->read_range(*src.info, off, n, buf.data());
    w.append(buf.data(), buf.size());
    off += n;
  }
}

}  // namespace

DSparkConfig generate_dspark_checkpoint(const std::string& target_dir, const std::string& out_dir, uint64_t seed,
                                        const DSparkGenerateOptions& o) {
  const K3Config target = load_k3_config((fs::path(target_dir) / "config.json").string());
  const json config_json = dspark_config_json(dspark_dims_for_target(target, o.layers), target);
  // Parse our own config through the real loader first: the generator can
  // never write a drafter the runtime would refuse.
  const DSparkConfig config = parse_dspark_config(config_json, "generated DSpark config.json");
  validate_dspark_for_target(config, target, "generated DSpark config.json");

  const Checkpoint target_ckpt = Checkpoint::open(target_dir);
  const std::string embed_name = "language_model.model.embed_tokens.weight";
  const TensorRef embed = target_ckpt.find(embed_name);
  if (!embed) fail(target_dir, ": tensor ", embed_name, " is missing");
  const std::vector<uint64_t> embed_shape = {static_cast<uint64_t>(target.vocab_size),
                                             static_cast<uint64_t>(target.hidden_size)};
  if (embed.info->dtype != DType::BF16 || embed.info->shape != embed_shape)
    fail(embed.shard->path(), ": tensor ", embed_name, " is not a BF16 [vocab, hidden] matrix");

  prepare_checkpoint_dir(out_dir, o.force);

  const std::vector<DSparkTensor> tensors = dspark_tensor_list(config);
  std::vector<TensorSpec> specs;
  for (const DSparkTensor& t : tensors) specs.push_back({t.name, DType::BF16, t.shape});
  SafetensorsWriter w((fs::path(out_dir) / "model.safetensors").string(), specs,
                      {{"format", "pt"}, {"torchspec_version", "0.1.0"}});
  for (const DSparkTensor& t : tensors) {
    if (t.name == "embed_tokens.weight")
      copy_tensor(w, embed);
    else
      write_random(w, t, seed);
  }
  w.commit();  // fsync + rename
  // config.json last: its presence marks a complete checkpoint.
  write_file_atomic((fs::path(out_dir) / "config.json").string(), config_json.dump(2) + "\n");
  return config;
}

}  // namespace deltafin
