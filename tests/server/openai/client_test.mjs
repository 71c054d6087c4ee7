// End-to-end check of `deltafin serve` through the official `openai` npm
// package: the SDK's own request building, SSE parsing and error classes
// against our server. openai_client_test.cpp makes a tiny model, starts the
// server, copies this file next to an install of the package and runs it:
//
//   DELTAFIN_TEST_BASE_URL=http://127.0.0.1:PORT   the server (without /v1)
//   DELTAFIN_TEST_API_KEY=KEY                      its --api-key
//   DELTAFIN_TEST_MODEL=NAME                       the served model id
//   DELTAFIN_TEST_MODEL_DIR=DIR                    the checkpoint (for the CLI expectations)
//   DELTAFIN_TEST_BINARY=PATH                      the deltafin executable
//   DELTAFIN_TEST_MAX_TOKENS=N                     the server's --max-tokens
//   DELTAFIN_TEST_FAMILY=NAME                      the model's family (kimi_k3, qwen3_moe)
//   DELTAFIN_TEST_BYTES_PER_POSITION=N             its session bytes per position, computed by hand
//   node client_test.mjs
//
// The expected texts and token counts come from the CLI (`deltafin run`,
// `deltafin tokenize`), not from the server. Every check runs even when an
// earlier one failed; the exit status is 1 when any failed.
import OpenAI from "openai";
import { VERSION } from "openai/version";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

function env(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`client_test.mjs: set ${name} (see the header of this file)`);
    process.exit(2);
  }
  return value;
}

const baseURL = env("DELTAFIN_TEST_BASE_URL");
const apiKey = env("DELTAFIN_TEST_API_KEY");
const model = env("DELTAFIN_TEST_MODEL");
const modelDir = env("DELTAFIN_TEST_MODEL_DIR");
const binary = env("DELTAFIN_TEST_BINARY");
const maxTokensCeiling = Number.parseInt(env("DELTAFIN_TEST_MAX_TOKENS"), 10);
const family = env("DELTAFIN_TEST_FAMILY");
const bytesPerPosition = Number.parseInt(env("DELTAFIN_TEST_BYTES_PER_POSITION"), 10);
const config = JSON.parse(readFileSync(modelDir + "/config.json", "utf8"));
const vocabSize = config.vocab_size ?? config.text_config?.vocab_size;
if (!Number.isInteger(vocabSize)) throw new Error(modelDir + "/config.json: no vocab_size");
// How a family's chat format joins a message's text parts: K3's template
// concatenates them; Qwen3's takes only strings, so parts are joined with
// newlines first (as vLLM does for such templates).
const partSeparator = family === "kimi_k3" ? "" : "\n";

// No retries: a retried request would hide a failure (and make 4xx/5xx slow).
const clientOptions = { baseURL: baseURL + "/v1", maxRetries: 0, timeout: 60_000 };
const client = new OpenAI({ ...clientOptions, apiKey });
console.log(`openai ${VERSION} against ${baseURL}, model "${model}" (${family})`);

// ---------------------------------------------------------------------------
// Independent expectations, from the CLI.

function deltafin(...args) {
  return execFileSync(binary, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
}

const PROMPT = "The capital of France is";
const PROMPT_MAX = 8;
const CHAT_MESSAGES = [{ role: "user", content: "Hello! What is the capital of France?" }];
const CHAT_MAX = 16;

// `deltafin run` prints the generated text and then one newline.
const runOutput = deltafin("run", "--model", modelDir, "--prompt", PROMPT, "--max-new", String(PROMPT_MAX));
assert.ok(runOutput.endsWith("\n"), "deltafin run output does not end with a newline: " + JSON.stringify(runOutput));
const expectedText = runOutput.slice(0, -1);
const promptIds = JSON.parse(deltafin("tokenize", "--model", modelDir, "--text", PROMPT, "--json"));
const chatPromptIds = JSON.parse(
  deltafin("tokenize", "--model", modelDir, "--chat", "--text", CHAT_MESSAGES[0].content, "--json"),
);
console.log(`expected (deltafin run): ${JSON.stringify(expectedText)}; prompt ${promptIds.length} tokens, ` +
            `chat prompt ${chatPromptIds.length} tokens`);

// ---------------------------------------------------------------------------
// A tiny runner: each check is reported, failures do not stop the others.

const failures = [];
async function check(name, fn) {
  const start = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - start} ms)`);
  } catch (e) {
    failures.push(name);
    const detail = String(e?.stack ?? e).split("\n").map((l) => "     " + l).join("\n");
    console.log(`FAIL ${name} (${Date.now() - start} ms)\n${detail}`);
  }
}

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

// Expects the call to throw the SDK's error class `cls` with this status (and
// param/code when given), and the message to name `mentions` (default: param).
async function expectApiError(call, { cls, status, param, code, mentions }) {
  let err = null;
  try {
    const result = await call();
    if (result && typeof result[Symbol.asyncIterator] === "function") await collect(result);
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected ${cls.name} (${status}), but the request succeeded`);
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, status, err.message);
  assert.equal(typeof err.error, "object", "the error body has no `error` object");
  assert.equal(typeof err.error.message, "string");
  if (param !== undefined) assert.equal(err.param, param, err.message);
  if (code !== undefined) assert.equal(err.code, code, err.message);
  const named = mentions ?? param;
  if (named) assert.ok(err.message.includes(named), `the message does not name "${named}": ${err.message}`);
  return err;
}

function assertUsageAdds(usage) {
  assert.ok(usage, "no usage");
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, JSON.stringify(usage));
}

// A stop string from the middle of `text`: 2-3 characters starting at a
// character that occurs once (so its first occurrence is known), without
// U+FFFD, with text on both sides.
function pickStop(text) {
  const cps = Array.from(text);
  const count = new Map();
  for (const c of cps) count.set(c, (count.get(c) ?? 0) + 1);
  const candidates = [];
  for (let i = 1; i < cps.length; ++i) {
    if (count.get(cps[i]) !== 1) continue;
    for (const len of [3, 2]) {
      if (i + len >= cps.length) continue;
      const piece = cps.slice(i, i + len);
      if (piece.includes("\uFFFD")) continue;
      candidates.push({ at: i, stop: piece.join(""), before: cps.slice(0, i).join("") });
      break;
    }
  }
  candidates.sort((a, b) => Math.abs(a.at - cps.length / 2) - Math.abs(b.at - cps.length / 2));
  return candidates[0] ?? null;
}

// ---------------------------------------------------------------------------
// Models.

await check("models.list() holds exactly the served model", async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [model]);
  assert.equal(page.data[0].object, "model");
  const seen = [];
  for await (const m of client.models.list()) seen.push(m.id);  // the SDK's auto-pagination
  assert.deepEqual(seen, [model]);
});

await check("models.retrieve(): the model, and NotFoundError for another", async () => {
  assert.equal((await client.models.retrieve(model)).id, model);
  await expectApiError(() => client.models.retrieve("no-such-model"), {
    cls: OpenAI.NotFoundError, status: 404, code: "model_not_found", mentions: "no-such-model",
  });
});

// ---------------------------------------------------------------------------
// Text completions.

let completion = null;  // the non-streaming completion of PROMPT
await check("completions.create: text equals `deltafin run`, usage from `deltafin tokenize`", async () => {
  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: PROMPT_MAX });
  completion = r;
  assert.equal(r.object, "text_completion");
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  const choice = r.choices[0];
  assert.equal(choice.index, 0);
  assert.equal(choice.text, expectedText);
  assertUsageAdds(r.usage);
  assert.equal(r.usage.prompt_tokens, promptIds.length);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= PROMPT_MAX, JSON.stringify(r.usage));
  assert.equal(choice.finish_reason, r.usage.completion_tokens === PROMPT_MAX ? "length" : "stop");
});

await check("completions.create stream + include_usage: same text, one finish, usage chunk last", async () => {
  assert.ok(completion, "needs the non-streaming completion");
  const chunks = await collect(await client.completions.create({
    model, prompt: PROMPT, max_tokens: PROMPT_MAX, stream: true, stream_options: { include_usage: true },
  }));
  assert.ok(chunks.length >= 2, `only ${chunks.length} chunks`);
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1, "chunks carry different ids: " + [...ids].join(", "));
  for (const c of chunks) assert.equal(c.model, model);
  const choices = chunks.flatMap((c) => c.choices);
  assert.equal(choices.map((c) => c.text).join(""), completion.choices[0].text);
  const finishes = choices.filter((c) => c.finish_reason != null);
  assert.equal(finishes.length, 1, "finish_reason values: " + JSON.stringify(choices.map((c) => c.finish_reason)));
  assert.equal(finishes[0].finish_reason, completion.choices[0].finish_reason);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assertUsageAdds(last.usage);
  assert.equal(last.usage.prompt_tokens, completion.usage.prompt_tokens);
  assert.equal(last.usage.completion_tokens, completion.usage.completion_tokens);
  for (const c of chunks.slice(0, -1)) assert.ok(c.usage == null, "usage before the last chunk: " + JSON.stringify(c));
});

await check("completions.create with the prompt as token ids gives the same text", async () => {
  const r = await client.completions.create({ model, prompt: promptIds, max_tokens: PROMPT_MAX });
  assert.equal(r.choices[0].text, expectedText);
  assert.equal(r.usage.prompt_tokens, promptIds.length);
  assert.equal(r.choices[0].finish_reason, completion?.choices[0].finish_reason ?? r.choices[0].finish_reason);
});

await check("completions.create with stop: text before the stop string, finish_reason stop", async () => {
  assert.ok(completion, "needs the non-streaming completion");
  const text = completion.choices[0].text;
  const pick = pickStop(text);
  assert.ok(pick, "no usable stop string in " + JSON.stringify(text));
  console.log(`     stop ${JSON.stringify(pick.stop)} in ${JSON.stringify(text)} -> ${JSON.stringify(pick.before)}`);

  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: PROMPT_MAX, stop: [pick.stop] });
  assert.equal(r.choices[0].text, pick.before);
  assert.ok(!r.choices[0].text.includes(pick.stop));
  assert.equal(r.choices[0].finish_reason, "stop");
  assertUsageAdds(r.usage);
  assert.ok(r.usage.completion_tokens <= completion.usage.completion_tokens, JSON.stringify(r.usage));

  const chunks = await collect(await client.completions.create({
    model, prompt: PROMPT, max_tokens: PROMPT_MAX, stop: [pick.stop], stream: true,
    stream_options: { include_usage: true },
  }));
  const choices = chunks.flatMap((c) => c.choices);
  assert.equal(choices.map((c) => c.text).join(""), pick.before);
  const finishes = choices.filter((c) => c.finish_reason != null).map((c) => c.finish_reason);
  assert.deepEqual(finishes, ["stop"]);
  assert.equal(chunks.at(-1).usage?.completion_tokens, r.usage.completion_tokens);
});

// ---------------------------------------------------------------------------
// Chat completions.

let chat = null;  // the non-streaming chat completion
await check("chat.completions.create: assistant message, content and reasoning_content, usage", async () => {
  const r = await client.chat.completions.create({ model, messages: CHAT_MESSAGES, max_tokens: CHAT_MAX });
  chat = r;
  assert.equal(r.object, "chat.completion");
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  const { message, finish_reason } = r.choices[0];
  console.log(`     reasoning ${JSON.stringify(message.reasoning_content)}, content ${JSON.stringify(message.content)}, ` +
              `finish ${finish_reason}, usage ${JSON.stringify(r.usage)}`);
  assert.equal(message.role, "assistant");
  assert.equal(typeof message.content, "string");
  if (message.reasoning_content !== undefined) assert.equal(typeof message.reasoning_content, "string");
  assertUsageAdds(r.usage);
  assert.equal(r.usage.prompt_tokens, chatPromptIds.length, "prompt_tokens vs `deltafin tokenize --chat`");
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= CHAT_MAX, JSON.stringify(r.usage));
  const reasoningTokens = r.usage.completion_tokens_details?.reasoning_tokens;
  assert.equal(typeof reasoningTokens, "number", JSON.stringify(r.usage));
  assert.ok(reasoningTokens >= 0 && reasoningTokens <= r.usage.completion_tokens, JSON.stringify(r.usage));
  assert.ok(["length", "stop"].includes(finish_reason), finish_reason);
  if (finish_reason === "length") assert.equal(r.usage.completion_tokens, CHAT_MAX);
});

await check("chat.completions.create stream: role first, deltas add up to the non-streaming message", async () => {
  assert.ok(chat, "needs the non-streaming chat completion");
  const chunks = await collect(await client.chat.completions.create({
    model, messages: CHAT_MESSAGES, max_tokens: CHAT_MAX, stream: true, stream_options: { include_usage: true },
  }));
  assert.ok(chunks.length >= 2, `only ${chunks.length} chunks`);
  for (const c of chunks) assert.equal(c.object, "chat.completion.chunk");
  assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
  assert.equal(chunks[0].choices[0]?.delta?.role, "assistant", JSON.stringify(chunks[0]));
  const choices = chunks.flatMap((c) => c.choices);
  const content = choices.map((c) => c.delta?.content ?? "").join("");
  const reasoning = choices.map((c) => c.delta?.reasoning_content ?? "").join("");
  const message = chat.choices[0].message;
  assert.equal(content, message.content);
  assert.equal(reasoning, message.reasoning_content ?? "");
  const finishes = choices.filter((c) => c.finish_reason != null).map((c) => c.finish_reason);
  assert.deepEqual(finishes, [chat.choices[0].finish_reason]);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assertUsageAdds(last.usage);
  assert.equal(last.usage.prompt_tokens, chat.usage.prompt_tokens);
  assert.equal(last.usage.completion_tokens, chat.usage.completion_tokens);
  assert.equal(last.usage.completion_tokens_details?.reasoning_tokens,
               chat.usage.completion_tokens_details.reasoning_tokens);
});

// ---------------------------------------------------------------------------
// OpenAI's dialect: refusal, developer, reasoning levels, neutral parameters,
// content parts. Each is compared with a request the server already answered.

await check("message.refusal is null (the SDK's type: string | null)", async () => {
  assert.ok(chat, "needs the non-streaming chat completion");
  assert.ok("refusal" in chat.choices[0].message, JSON.stringify(chat.choices[0].message));
  assert.equal(chat.choices[0].message.refusal, null);
});

await check("role developer answers exactly as role system", async () => {
  const asSystem = await client.chat.completions.create({
    model, max_tokens: 6, messages: [{ role: "system", content: "Be terse." }, ...CHAT_MESSAGES],
  });
  const asDeveloper = await client.chat.completions.create({
    model, max_tokens: 6, messages: [{ role: "developer", content: "Be terse." }, ...CHAT_MESSAGES],
  });
  assert.equal(asDeveloper.choices[0].message.content, asSystem.choices[0].message.content);
  assert.equal(asDeveloper.choices[0].message.reasoning_content, asSystem.choices[0].message.reasoning_content);
  assert.equal(asDeveloper.usage.prompt_tokens, asSystem.usage.prompt_tokens);
});

await check("reasoning_effort minimal/low/medium/high all accepted, rendered as the family's template takes them", async () => {
  const prompts = {};
  for (const effort of ["minimal", "low", "medium", "high"]) {
    const r = await client.chat.completions.create({ model, messages: CHAT_MESSAGES, max_tokens: 2, reasoning_effort: effort });
    prompts[effort] = r.usage.prompt_tokens;
  }
  if (family === "kimi_k3") {
    // K3's effort is a system message in the prompt: "medium" -> "high", "minimal" -> "low".
    const highIds = JSON.parse(deltafin("tokenize", "--model", modelDir, "--chat", "--reasoning-effort", "high", "--json",
                                        "--text", CHAT_MESSAGES[0].content));
    assert.equal(prompts.medium, highIds.length, JSON.stringify(prompts));
    assert.equal(prompts.medium, prompts.high);
    assert.equal(prompts.minimal, prompts.low);
  } else {
    // Qwen3's template has thinking on or off, no levels: every level is the plain chat prompt.
    for (const effort of Object.keys(prompts)) assert.equal(prompts[effort], chatPromptIds.length, JSON.stringify(prompts));
  }
});

await check("neutral sampling and bookkeeping parameters are accepted and change nothing", async () => {
  const r = await client.chat.completions.create({
    model, messages: CHAT_MESSAGES, max_tokens: CHAT_MAX, frequency_penalty: 0, presence_penalty: 0, logit_bias: {},
    store: false, metadata: { run: "ci" }, response_format: { type: "text" }, top_p: 1, seed: 7, user: "u",
  });
  assert.equal(r.choices[0].message.content, chat.choices[0].message.content);
  assert.equal(r.usage.completion_tokens, chat.usage.completion_tokens);
  const t = await client.completions.create({
    model, prompt: PROMPT, max_tokens: PROMPT_MAX, frequency_penalty: 0, presence_penalty: 0, logit_bias: {},
  });
  assert.equal(t.choices[0].text, expectedText);
});

await check("non-neutral penalties, logit_bias, store (and json_object where the template has no format) -> BadRequestError naming the field", async () => {
  const base = { model, messages: CHAT_MESSAGES, max_tokens: 4 };
  for (const [extra, param] of [
    [{ frequency_penalty: 0.5 }, "frequency_penalty"], [{ presence_penalty: -1 }, "presence_penalty"],
    [{ logit_bias: { "5": 10 } }, "logit_bias.5"], [{ store: true }, "store"],
    ...(family === "kimi_k3" ? [] : [[{ response_format: { type: "json_object" } }, "response_format.type"]]),
  ]) {
    await expectApiError(() => client.chat.completions.create({ ...base, ...extra }), {
      cls: OpenAI.BadRequestError, status: 400, param,
    });
  }
});

await check("content parts are joined before tokenising: [\"Hello \", \"there\"] == the family's join", async () => {
  const joined = await client.chat.completions.create({
    model, max_tokens: 6, messages: [{ role: "user", content: "Hello " + partSeparator + "there" }],
  });
  const parts = await client.chat.completions.create({
    model, max_tokens: 6,
    messages: [{ role: "user", content: [{ type: "text", text: "Hello " }, { type: "text", text: "there" }] }],
  });
  assert.equal(parts.usage.prompt_tokens, joined.usage.prompt_tokens);
  assert.equal(parts.choices[0].message.content, joined.choices[0].message.content);
  assert.equal(parts.choices[0].message.reasoning_content, joined.choices[0].message.reasoning_content);
});

// ---------------------------------------------------------------------------
// Tools and response formats: the SDK's request shapes, rendered as
// `deltafin tokenize --chat` renders the same fields.

const TOOLS = [
  { type: "function", function: { name: "get_weather", description: "Weather for a city", strict: true,
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "number" } }, required: ["city"] } } },
  { type: "function", function: { name: "now", description: "The time" } },
];
const TOOL_HISTORY = [
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: null, tool_calls: [
    { id: "call_1", type: "function", function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris", days: 2 }) } },
    { id: "call_2", type: "function", function: { name: "now", arguments: "{}" } },
  ] },
  { role: "tool", tool_call_id: "call_2", content: "12:00" },
  { role: "tool", tool_call_id: "call_1", content: "Sunny, 21 C" },
];
const SCHEMA_FORMAT = { type: "json_schema", json_schema: { name: "answer", strict: true,
  schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } };

function tokenizeChat(messages, { tools, toolChoice, responseFormat } = {}) {
  const args = ["tokenize", "--model", modelDir, "--json", "--messages", JSON.stringify(messages)];
  if (tools) args.push("--tools", JSON.stringify(tools));
  if (toolChoice) args.push("--tool-choice", JSON.stringify(toolChoice));
  if (responseFormat) args.push("--response-format", JSON.stringify(responseFormat));
  return JSON.parse(deltafin(...args));
}

// What each family's template can say: K3's has tool-choice and
// response-format messages; Qwen3's only declares tools (and "none" leaves
// them out), so it refuses the rest by name.
const NAMED = { type: "function", function: { name: "now" } };
const renderCases = family === "kimi_k3"
  ? [["tools + history", { tools: TOOLS }, { tools: TOOLS }],
     ["required + json_schema", { tools: TOOLS, tool_choice: "required", response_format: SCHEMA_FORMAT },
      { tools: TOOLS, toolChoice: "required", responseFormat: SCHEMA_FORMAT }],
     ["none + json_object", { tools: TOOLS, tool_choice: "none", response_format: { type: "json_object" } },
      { tools: TOOLS, toolChoice: "none", responseFormat: { type: "json_object" } }],
     ["a named function", { tools: TOOLS, tool_choice: NAMED }, { tools: TOOLS, toolChoice: NAMED }]]
  : [["tools + history", { tools: TOOLS }, { tools: TOOLS }],
     ["auto", { tools: TOOLS, tool_choice: "auto" }, { tools: TOOLS, toolChoice: "auto" }],
     ["none", { tools: TOOLS, tool_choice: "none" }, { tools: TOOLS, toolChoice: "none" }]];

await check("tools, tool history, tool_choice and formats: prompt_tokens == `deltafin tokenize --chat` with the same fields", async () => {
  for (const [what, extra, expected] of renderCases) {
    const r = await client.chat.completions.create({ model, messages: TOOL_HISTORY, max_tokens: 4, parallel_tool_calls: true, ...extra });
    assert.equal(r.usage.prompt_tokens, tokenizeChat(TOOL_HISTORY, expected).length, what);
    assert.ok(["stop", "length", "tool_calls"].includes(r.choices[0].finish_reason), what);
    for (const c of r.choices[0].message.tool_calls ?? []) assert.equal(c.type, "function", what);
  }
});

await check("a streamed request with tools gives the same turn as the non-streamed one", async () => {
  const body = { model, messages: TOOL_HISTORY, max_tokens: 8, tools: TOOLS };
  const whole = await client.chat.completions.create(body);
  const chunks = await collect(await client.chat.completions.create({ ...body, stream: true }));
  const content = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
  assert.equal(content, whole.choices[0].message.content ?? "");
  assert.equal(chunks.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
});

if (family !== "kimi_k3") {
  await check("what Qwen3's template cannot ask for -> BadRequestError naming the field", async () => {
    const base = { model, messages: CHAT_MESSAGES, max_tokens: 4, tools: TOOLS };
    for (const [extra, param] of [
      [{ tool_choice: "required" }, "tool_choice"], [{ tool_choice: NAMED }, "tool_choice"],
      [{ response_format: SCHEMA_FORMAT }, "response_format.type"],
    ]) {
      await expectApiError(() => client.chat.completions.create({ ...base, ...extra }), {
        cls: OpenAI.BadRequestError, status: 400, param,
      });
    }
  });
}

await check("bad tool shapes -> BadRequestError naming the field", async () => {
  const base = { model, messages: CHAT_MESSAGES, max_tokens: 4 };
  for (const [extra, param] of [
    [{ tools: [{ type: "function", function: { name: "has space" } }] }, "tools[0].function.name"],
    [{ tools: TOOLS, tool_choice: { type: "function", function: { name: "missing" } } }, "tool_choice.function.name"],
    [{ tool_choice: "required" }, "tool_choice"],
    [{ tools: [TOOLS[1], TOOLS[1]] }, "tools[1]"],
    [{ response_format: { type: "json_schema", json_schema: { schema: {} } } }, "response_format.json_schema.name"],
  ]) {
    await expectApiError(() => client.chat.completions.create({ ...base, ...extra }), {
      cls: OpenAI.BadRequestError, status: 400, param,
    });
  }
});

// ---------------------------------------------------------------------------
// Errors, through the SDK's error classes.

await check("unknown model -> NotFoundError 404 model_not_found", async () => {
  await expectApiError(
    () => client.chat.completions.create({ model: "not-" + model, messages: CHAT_MESSAGES, max_tokens: 4 }),
    { cls: OpenAI.NotFoundError, status: 404, param: "model", code: "model_not_found", mentions: "not-" + model },
  );
  await expectApiError(() => client.completions.create({ model: "not-" + model, prompt: PROMPT, max_tokens: 4 }), {
    cls: OpenAI.NotFoundError, status: 404, code: "model_not_found",
  });
});

await check("temperature 0.7 -> BadRequestError param temperature (also when streaming)", async () => {
  const body = { model, messages: CHAT_MESSAGES, max_tokens: 4, temperature: 0.7 };
  await expectApiError(() => client.chat.completions.create(body), {
    cls: OpenAI.BadRequestError, status: 400, param: "temperature",
  });
  await expectApiError(() => client.chat.completions.create({ ...body, stream: true }), {
    cls: OpenAI.BadRequestError, status: 400, param: "temperature",
  });
  // temperature 0 is greedy, which is what the server does: accepted.
  const r = await client.chat.completions.create({ ...body, temperature: 0 });
  assert.equal(r.choices.length, 1);
});

await check("n: 2 -> BadRequestError param n", async () => {
  await expectApiError(() => client.chat.completions.create({ model, messages: CHAT_MESSAGES, max_tokens: 4, n: 2 }), {
    cls: OpenAI.BadRequestError, status: 400, param: "n",
  });
});

await check("an unknown body field -> BadRequestError naming it", async () => {
  await expectApiError(
    () => client.chat.completions.create({ model, messages: CHAT_MESSAGES, max_tokens: 4, frobnicate_level: 3 }),
    { cls: OpenAI.BadRequestError, status: 400, param: "frobnicate_level", code: "unknown_field" },
  );
  await expectApiError(
    () => client.completions.create({ model, prompt: PROMPT, max_tokens: 4, frobnicate_level: 3 }),
    { cls: OpenAI.BadRequestError, status: 400, param: "frobnicate_level", code: "unknown_field" },
  );
});

await check("an image content part -> BadRequestError param messages[0].content[0].type", async () => {
  const messages = [{
    role: "user",
    content: [{ type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }],
  }];
  await expectApiError(() => client.chat.completions.create({ model, messages, max_tokens: 4 }), {
    cls: OpenAI.BadRequestError, status: 400, param: "messages[0].content[0].type",
  });
});

await check("logprobs: true -> BadRequestError param logprobs", async () => {
  await expectApiError(
    () => client.chat.completions.create({ model, messages: CHAT_MESSAGES, max_tokens: 4, logprobs: true }),
    { cls: OpenAI.BadRequestError, status: 400, param: "logprobs" },
  );
});

await check("a wrong API key -> AuthenticationError 401", async () => {
  const wrong = new OpenAI({ ...clientOptions, apiKey: "not-" + apiKey });
  await expectApiError(() => wrong.models.list(), {
    cls: OpenAI.AuthenticationError, status: 401, code: "invalid_api_key", mentions: "API key",
  });
  await expectApiError(() => wrong.chat.completions.create({ model, messages: CHAT_MESSAGES, max_tokens: 4 }), {
    cls: OpenAI.AuthenticationError, status: 401, code: "invalid_api_key",
  });
});

await check(`max_tokens over --max-tokens ${maxTokensCeiling} -> BadRequestError param max_tokens`, async () => {
  await expectApiError(
    () => client.chat.completions.create({ model, messages: CHAT_MESSAGES, max_tokens: maxTokensCeiling + 1 }),
    { cls: OpenAI.BadRequestError, status: 400, param: "max_tokens", mentions: String(maxTokensCeiling) },
  );
  await expectApiError(
    () => client.completions.create({ model, prompt: PROMPT, max_tokens: maxTokensCeiling + 1 }),
    { cls: OpenAI.BadRequestError, status: 400, param: "max_tokens" },
  );
});

await check("a prompt over the session budget's context -> BadRequestError context_length_exceeded with both numbers", async () => {
  const health = await (await fetch(baseURL + "/health")).json();
  const context = health.context_limit, budget = health.session_budget_bytes;
  assert.equal(budget, 6_000_000, JSON.stringify(health));
  assert.equal(health.session_bytes_per_position, bytesPerPosition, JSON.stringify(health));
  assert.ok(context > 300 && context <= 6_000_000 / bytesPerPosition, JSON.stringify(health));
  const ids = Array.from({ length: context }, (_, i) => 100 + (i % Math.min(500, vocabSize - 100)));
  await expectApiError(() => client.completions.create({ model, prompt: ids, max_tokens: 1 }), {
    cls: OpenAI.BadRequestError, status: 400, param: "prompt", code: "context_length_exceeded",
    mentions: `${context} tokens`,
  });
  await expectApiError(() => client.completions.create({ model, prompt: ids, max_tokens: 1 }), {
    cls: OpenAI.BadRequestError, status: 400, mentions: String(budget),
  });
});

await check("empty messages -> BadRequestError param messages", async () => {
  await expectApiError(() => client.chat.completions.create({ model, messages: [], max_tokens: 4 }), {
    cls: OpenAI.BadRequestError, status: 400, param: "messages",
  });
});

await check("the server still answers after the errors", async () => {
  const r = await client.completions.create({ model, prompt: PROMPT, max_tokens: PROMPT_MAX });
  assert.equal(r.choices[0].text, expectedText);
});

if (failures.length) {
  console.log(`\n${failures.length} check(s) failed:\n` + failures.map((f) => "  - " + f).join("\n"));
  process.exitCode = 1;
} else {
  console.log("\nall checks passed");
}
