// The Qwen3 checkpoint generator: the files parse as what Hugging Face tools
// expect (config.json, tokenizer.json in the `tokenizers` format,
// tokenizer_config.json), the BPE tables are self-consistent, output is
// deterministic, and an existing checkpoint is only replaced with force.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "model/qwen3/qwen3_generator.h"
#include "model/qwen3/qwen3_model.h"
#include "support/test_support.h"
#include "util/file.h"

namespace deltafin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Qwen3GenerateOptions small(const std::string& dir) {
  Qwen3GenerateOptions o;
  o.out_dir = dir;
  o.hidden = 32, o.intermediate = 64, o.layers = 1, o.heads = 2, o.kv_heads = 1, o.head_dim = 16;
  o.vocab = 400;
  return o;
}

json read_json(const std::string& path) { return json::parse(read_text_file(path)); }

TEST(Qwen3Generator, WritesAHuggingFaceQwen3Checkpoint) {
  test::TempDir dir;
  Qwen3GenerateResult r = generate_qwen3_checkpoint(small(dir.path()));
  EXPECT_EQ(r.shards, 1);
  EXPECT_EQ(r.tensors, 1u + 11u + 1u);  // embed, one layer, final norm (tied: no lm_head)
  EXPECT_TRUE(file_exists(dir.file("model.safetensors")));
  EXPECT_FALSE(file_exists(dir.file("model.safetensors.index.json")));

  const json cfg = read_json(dir.file("config.json"));
  EXPECT_EQ(cfg["model_type"], "qwen3");
  EXPECT_EQ(cfg["architectures"], json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(cfg["head_dim"], 16);
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
  EXPECT_TRUE(cfg["rope_scaling"].is_null());
  EXPECT_EQ(cfg["attention_bias"], false);
  EXPECT_EQ(cfg["hidden_act"], "silu");
  EXPECT_EQ(cfg["tie_word_embeddings"], true);
  EXPECT_EQ(cfg["eos_token_id"], 391);  // <|endoftext|>: 400 - 9 added tokens
  Qwen3Config c = read_qwen3_config(dir.file("config.json"));
  EXPECT_EQ(c.vocab_size, 400);

  const json tok = read_json(dir.file("tokenizer.json"));
  EXPECT_EQ(tok["normalizer"]["type"], "NFC");
  const json& pre = tok["pre_tokenizer"];
  EXPECT_EQ(pre["type"], "Sequence");
  ASSERT_EQ(pre["pretokenizers"].size(), 2u);
  EXPECT_EQ(pre["pretokenizers"][0]["type"], "Split");
  EXPECT_EQ(pre["pretokenizers"][0]["pattern"]["Regex"], kQwen3Pattern);
  EXPECT_EQ(pre["pretokenizers"][0]["behavior"], "Isolated");
  EXPECT_EQ(pre["pretokenizers"][0]["invert"], false);
  EXPECT_EQ(pre["pretokenizers"][1]["type"], "ByteLevel");
  EXPECT_EQ(pre["pretokenizers"][1]["add_prefix_space"], false);
  EXPECT_EQ(pre["pretokenizers"][1]["trim_offsets"], false);
  EXPECT_EQ(pre["pretokenizers"][1]["use_regex"], false);
  EXPECT_EQ(tok["decoder"]["type"], "ByteLevel");
  const json& model = tok["model"];
  EXPECT_EQ(model["type"], "BPE");
  EXPECT_EQ(model["byte_fallback"], false);

  // The vocabulary: 391 byte-level tokens with ids 0..390, bytes in byte order
  // first under GPT-2's byte<->unicode mapping.
  const json& vocab = model["vocab"];
  ASSERT_EQ(vocab.size(), 391u);
  EXPECT_EQ(vocab.at("!"), 33);
  EXPECT_EQ(vocab.at("A"), 65);
  EXPECT_EQ(vocab.at("\xC4\xA0"), 32);   // U+0120 'Ġ' is the space byte
  EXPECT_EQ(vocab.at("\xC4\x80"), 0);    // U+0100 is byte 0
  EXPECT_EQ(vocab.at("\xC4\x8A"), 10);   // U+010A 'Ċ' is '\n'
  std::set<int64_t> ids;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) ids.insert(it.value().get<int64_t>());
  EXPECT_EQ(ids.size(), 391u);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 390);

  // Every merge is "left right" of two tokens whose concatenation is a token,
  // listed in order of the merged token's id; every merged token has one.
  const json& merges = model["merges"];
  ASSERT_GE(merges.size(), 391u - 256u);
  int64_t last = 0;
  std::set<int64_t> made;
  for (const json& m : merges) {
    ASSERT_TRUE(m.is_string());
    const std::string s = m.get<std::string>();
    const size_t space = s.find(' ');
    ASSERT_NE(space, std::string::npos) << s;
    EXPECT_EQ(s.find(' ', space + 1), std::string::npos) << s;
    const std::string l = s.substr(0, space), r = s.substr(space + 1);
    ASSERT_TRUE(vocab.contains(l) && vocab.contains(r) && vocab.contains(l + r)) << s;
    const int64_t id = vocab[l + r].get<int64_t>();
    EXPECT_GE(id, last);
    EXPECT_GE(id, 256);
    last = id;
    made.insert(id);
  }
  EXPECT_EQ(made.size(), 391u - 256u);

  const json& added = tok["added_tokens"];
  ASSERT_EQ(added.size(), 9u);
  const char* names[9] = {"<|endoftext|>", "<|im_start|>",     "<|im_end|>", "<tool_call>", "</tool_call>",
                          "<tool_response>", "</tool_response>", "<think>",    "</think>"};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(added[i]["id"], 391 + i);
    EXPECT_EQ(added[i]["content"], names[i]);
    EXPECT_EQ(added[i]["special"], i < 3) << names[i];  // the tool and think tags are not special in Qwen3
    EXPECT_EQ(added[i]["normalized"], false);
  }

  const json tc = read_json(dir.file("tokenizer_config.json"));
  EXPECT_EQ(tc["tokenizer_class"], "Qwen2Tokenizer");
  EXPECT_EQ(tc["eos_token"], "<|endoftext|>");
  EXPECT_EQ(tc["added_tokens_decoder"]["392"]["content"], "<|im_start|>");
  EXPECT_EQ(tc["added_tokens_decoder"]["394"]["content"], "<tool_call>");
  EXPECT_EQ(tc["added_tokens_decoder"]["398"]["content"], "<think>");
  EXPECT_EQ(tc["add_bos_token"], false);

  // And the checkpoint loads and runs.
  Qwen3Weights w = load_qwen3_weights(c, dir.path());
  Qwen3Model m(c, w, nullptr);
  Qwen3Session s(c);
  const std::vector<uint32_t> tokens = {1, 2, 3};
  EXPECT_EQ(m.forward(s, tokens, false).size(), 400u);
}

TEST(Qwen3Generator, IsDeterministicAndSeeded) {
  test::TempDir a, b, c;
  Qwen3GenerateOptions o = small(a.path());
  generate_qwen3_checkpoint(o);
  o.out_dir = b.path();
  generate_qwen3_checkpoint(o);
  o.out_dir = c.path();
  o.seed = 2;
  generate_qwen3_checkpoint(o);
  EXPECT_EQ(read_text_file(a.file("model.safetensors")), read_text_file(b.file("model.safetensors")));
  EXPECT_NE(read_text_file(a.file("model.safetensors")), read_text_file(c.file("model.safetensors")));
  EXPECT_EQ(read_text_file(a.file("tokenizer.json")), read_text_file(c.file("tokenizer.json")));
}

// The defaults (what make-model --arch qwen3 gets without dimension flags)
// train and load: the built-in text has enough pairs for their merges.
TEST(Qwen3Generator, DefaultsWork) {
  test::TempDir dir;
  Qwen3GenerateOptions o;
  o.out_dir = dir.path();
  Qwen3GenerateResult r = generate_qwen3_checkpoint(o);
  EXPECT_EQ(r.config.vocab_size, 512);
  EXPECT_EQ(read_json(dir.file("tokenizer.json"))["model"]["vocab"].size(), 503u);
  EXPECT_EQ(load_qwen3_weights(r.config, dir.path()).layers.size(), 2u);
}

TEST(Qwen3Generator, OverwritesOnlyWithForce) {
  test::TempDir dir;
  Qwen3GenerateOptions o = small(dir.path());
  o.shards = 2;
  generate_qwen3_checkpoint(o);
  EXPECT_TRUE(file_exists(dir.file("model-00002-of-00002.safetensors")));
  o.shards = 1;
  EXPECT_FAILS_WITH(generate_qwen3_checkpoint(o), dir.path(), "--force");
  o.force = true;
  generate_qwen3_checkpoint(o);
  // The old shards and index are gone: the directory holds one checkpoint.
  EXPECT_FALSE(file_exists(dir.file("model-00001-of-00002.safetensors")));
  EXPECT_FALSE(file_exists(dir.file("model.safetensors.index.json")));
  EXPECT_TRUE(file_exists(dir.file("model.safetensors")));
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(Qwen3Generator, RefusesBadOptions) {
  test::TempDir dir;
  Qwen3GenerateOptions o = small(dir.path());
  o.kv_heads = 3;
  EXPECT_FAILS_WITH(generate_qwen3_checkpoint(o), "num_key_value_heads");
  o = small(dir.path());
  o.vocab = 200;
  EXPECT_FAILS_WITH(generate_qwen3_checkpoint(o), "too small");
  o = small(dir.path());
  o.shards = 0;
  EXPECT_FAILS_WITH(generate_qwen3_checkpoint(o), "--shards");
  EXPECT_FALSE(file_exists(dir.file("config.json")));
}

}  // namespace
}  // namespace deltafin
