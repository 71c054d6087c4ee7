// Token oracle for tiktoken_oracle_test.cpp: runs the real tiktoken core (the
// `tiktoken` npm package, tiktoken's Rust code compiled to WASM, regexes by
// fancy-regex) over a corpus and writes what it produced.
//
//   node oracle.mjs <npm prefix holding node_modules/tiktoken> <request.json> <out dir>
//
// request.json: {"k3_pattern": str, "corpus": [str], "special_texts": [str]}
// Writes into <out dir>:
//   cl100k_base.tiktoken, o200k_base.tiktoken   rank files (`base64 rank` lines)
//   result.json  {"version", "encodings": {name: {pat_str, special_tokens, n_ranks, ranks_checked}},
//                 "ids": {"cl100k_base" | "o200k_base" | "o200k_base+k3_pattern": [[id]]},
//                 "special_ids": {"cl100k_base" | "o200k_base": [[id]]}}
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [prefix, requestPath, outDir] = process.argv.slice(2);
if (!prefix || !requestPath || !outDir) {
  console.error("usage: node oracle.mjs <npm prefix> <request.json> <out dir>");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(prefix), "package.json"));
const { Tiktoken } = require("tiktoken/lite");
// package.json is not among the package's exports, so read it as a file.
const version = JSON.parse(
  fs.readFileSync(path.join(path.resolve(prefix), "node_modules", "tiktoken", "package.json"), "utf8"),
).version;
const request = JSON.parse(fs.readFileSync(requestPath, "utf8"));

// The package's encoder JSON stores ranks compressed as lines
// "! <offset> <b64> <b64> ...", the k-th base64 token of a line having rank
// offset + k. This mirrors CoreBPEConstructor::parse_bfe in the package's
// Rust source (wasm/src/lib.rs); ranks_checked below confirms it against the
// loaded encoder itself.
function parseRanks(bpeRanks) {
  const tokens = [];
  for (const line of bpeRanks.split("\n")) {
    if (line.length === 0) continue;
    const parts = line.split(" ");
    if (parts[0] !== "!") throw new Error("unexpected bpe_ranks line start: " + parts[0]);
    const offset = Number.parseInt(parts[1], 10);
    for (let k = 2; k < parts.length; ++k) tokens[offset + k - 2] = parts[k];
  }
  for (let r = 0; r < tokens.length; ++r) if (tokens[r] === undefined) throw new Error("rank gap at " + r);
  return tokens;
}

const result = { version, encodings: {}, ids: {}, special_ids: {} };
const encodeAll = (enc, texts) => texts.map((t) => Array.from(enc.encode_ordinary(t)));

for (const name of ["cl100k_base", "o200k_base"]) {
  const data = require(`tiktoken/encoders/${name}.json`);
  const tokens = parseRanks(data.bpe_ranks);
  fs.writeFileSync(path.join(outDir, `${name}.tiktoken`), tokens.map((b64, r) => `${b64} ${r}\n`).join(""));

  const enc = new Tiktoken(data.bpe_ranks, data.special_tokens, data.pat_str);
  // Every rank: the encoder maps the token's bytes to exactly that rank.
  let checked = 0;
  for (let r = 0; r < tokens.length; ++r) {
    const bytes = Buffer.from(tokens[r], "base64");
    const got = enc.encode_single_token(new Uint8Array(bytes));
    if (got !== r) throw new Error(`${name}: token of rank ${r} encodes as ${got}`);
    ++checked;
  }
  result.encodings[name] = {
    pat_str: data.pat_str,
    special_tokens: data.special_tokens,
    n_ranks: tokens.length,
    ranks_checked: checked,
  };
  result.ids[name] = encodeAll(enc, request.corpus);
  result.special_ids[name] = request.special_texts.map((t) => Array.from(enc.encode(t, "all")));
  enc.free();

  if (name === "o200k_base") {
    // The K3 pattern exactly as written (with Rust's `&&`), given to
    // fancy-regex as the encoder's pattern.
    const k3 = new Tiktoken(data.bpe_ranks, data.special_tokens, request.k3_pattern);
    result.ids["o200k_base+k3_pattern"] = encodeAll(k3, request.corpus);
    k3.free();
  }
}

fs.writeFileSync(path.join(outDir, "result.json"), JSON.stringify(result));
