// End-to-end check of `deltafin serve`'s Messages API through the official
// `@anthropic-ai/sdk` npm package: the SDK's request building, event parsing
// (MessageStream, raw events with pings between them), typed blocks and
// error classes against our server. anthropic_client_test.cpp starts the
// server and runs this next to an install of the package:
//
//   DELTAFIN_TEST_BASE_URL=http://127.0.0.1:PORT   the server (the SDK adds /v1)
//   DELTAFIN_TEST_API_KEY=KEY                      its --api-key
//   DELTAFIN_TEST_MODEL=NAME                       the served model id
//   DELTAFIN_TEST_MODE=random|scripted             which checks (below)
//   random:   DELTAFIN_TEST_MODEL_DIR=DIR, DELTAFIN_TEST_BINARY=PATH (the CLI's
//             token counts are the expectations), a tiny K3 checkpoint
//   scripted: DELTAFIN_TEST_CALL_ARGUMENTS=JSON, a Qwen3-MoE checkpoint whose
//             greedy answer to any chat is one get_weather call with them
//   node messages_test.mjs
//
// Every check runs even when an earlier one failed; the exit status is 1
// when any failed.
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";

function env(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`messages_test.mjs: set ${name} (see the header of this file)`);
    process.exit(2);
  }
  return value;
}

const baseURL = env("DELTAFIN_TEST_BASE_URL");
const apiKey = env("DELTAFIN_TEST_API_KEY");
const model = env("DELTAFIN_TEST_MODEL");
const mode = env("DELTAFIN_TEST_MODE");
// No retries: a retried request would hide a failure.
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
console.log(`@anthropic-ai/sdk against ${baseURL}, model "${model}" (${mode})`);

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

// Expects the call to throw the SDK's class `cls` with this status, an
// Anthropic error body of `type`, and a message naming `mentions`.
async function expectApiError(call, { cls, status, type, mentions }) {
  let err = null;
  try {
    const result = await call();
    if (result && typeof result[Symbol.asyncIterator] === "function") for await (const _ of result);
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected ${cls.name} (${status}), but the request succeeded`);
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, status, err.message);
  assert.equal(err.error?.type, "error", JSON.stringify(err.error));
  assert.equal(err.type, type, err.message);
  assert.equal(typeof err.apiMessage, "string");
  if (mentions) assert.ok(err.apiMessage.includes(mentions), `the message does not name "${mentions}": ${err.apiMessage}`);
}

// The event names of a raw stream, in order (pings never reach an SDK user).
function assertEventGrammar(types) {
  assert.equal(types[0], "message_start", types.join(","));
  assert.equal(types.at(-2), "message_delta", types.join(","));
  assert.equal(types.at(-1), "message_stop", types.join(","));
  let open = false;
  for (const t of types.slice(1, -2)) {
    if (t === "content_block_start") {
      assert.ok(!open, types.join(","));
      open = true;
    } else {
      assert.ok(open, types.join(","));
      if (t === "content_block_stop") open = false;
      else assert.equal(t, "content_block_delta");
    }
  }
  assert.ok(!open);
}

function without(message, ...usageKeys) {
  const copy = structuredClone(message);
  delete copy.id;
  for (const k of usageKeys) delete copy.usage[k];
  return copy;
}

const ASK = [{ role: "user", content: "Hello! What is the capital of France?" }];

if (mode === "random") {
  const modelDir = env("DELTAFIN_TEST_MODEL_DIR");
  const binary = env("DELTAFIN_TEST_BINARY");
  const deltafin = (...args) =>
    execFileSync(binary, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
  const tokenize = (...extra) => JSON.parse(deltafin("tokenize", "--model", modelDir, "--chat", "--text", ASK[0].content, "--json", ...extra)).length;
  const noThinkingTokens = tokenize("--no-thinking");
  const MAX = 16;

  let plain = null;
  await check("messages.create: a typed message of text blocks; input tokens == `deltafin tokenize --chat --no-thinking`", async () => {
    const m = await client.messages.create({ model, max_tokens: MAX, messages: ASK });
    plain = m;
    assert.equal(m.type, "message");
    assert.equal(m.role, "assistant");
    assert.equal(m.model, model);
    assert.ok(m.id.startsWith("msg_"), m.id);
    assert.ok(m.content.every((b) => b.type === "text"), JSON.stringify(m.content));
    assert.ok(["end_turn", "max_tokens"].includes(m.stop_reason), m.stop_reason);
    assert.equal(m.stop_sequence, null);
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, noThinkingTokens, JSON.stringify(m.usage));
    assert.equal(m.usage.cache_creation_input_tokens, 0);
    assert.ok(m.usage.output_tokens >= 1 && m.usage.output_tokens <= MAX, JSON.stringify(m.usage));
    assert.equal(m.stop_reason === "max_tokens", m.usage.output_tokens === MAX);
  });

  await check("messages.countTokens == `deltafin tokenize --chat` (thinking off, and a budget's level)", async () => {
    assert.deepEqual(await client.messages.countTokens({ model, messages: ASK }), { input_tokens: noThinkingTokens });
    const low = await client.messages.countTokens({ model, messages: ASK, thinking: { type: "enabled", budget_tokens: 2000 } });
    assert.equal(low.input_tokens, tokenize("--reasoning-effort", "low"));
    const tools = [{ name: "get_weather", description: "Weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];
    const openaiTools = tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.input_schema } }));
    const withTools = await client.messages.countTokens({ model, messages: ASK, tools, tool_choice: { type: "any" } });
    assert.equal(withTools.input_tokens, tokenize("--no-thinking", "--tools", JSON.stringify(openaiTools), "--tool-choice", '"required"'));
  });

  let thought = null;
  await check("thinking adaptive: the thinking block and text are the chat route's reasoning_content and content", async () => {
    const m = await client.messages.create({ model, max_tokens: MAX, messages: ASK, thinking: { type: "adaptive" } });
    thought = m;
    const r = await fetch(baseURL + "/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer " + apiKey },
      body: JSON.stringify({ model, max_tokens: MAX, messages: ASK }),
    });
    assert.equal(r.status, 200);
    const chat = (await r.json()).choices[0].message;
    const thinking = m.content.filter((b) => b.type === "thinking");
    assert.ok(thinking.length <= 1, JSON.stringify(m.content));
    assert.equal(thinking.map((b) => b.thinking).join(""), chat.reasoning_content ?? "");
    for (const b of thinking) assert.equal(typeof b.signature, "string");
    assert.equal(m.content.filter((b) => b.type === "text").map((b) => b.text).join(""), chat.content ?? "");
    assert.equal(m.usage.output_tokens_details?.thinking_tokens >= 0, true, JSON.stringify(m.usage));
  });

  await check("messages.stream: finalMessage() equals the whole message; text and thinking events add up", async () => {
    assert.ok(thought, "needs the thinking message");
    let text = "", thinking = "";
    const stream = client.messages
      .stream({ model, max_tokens: MAX, messages: ASK, thinking: { type: "adaptive" } })
      .on("text", (t) => (text += t))
      .on("thinking", (t) => (thinking += t));
    const m = await stream.finalMessage();
    for (const key of ["type", "role", "model", "content", "stop_reason", "stop_sequence"]) assert.deepEqual(m[key], thought[key], key);
    assert.deepEqual(without(m, "input_tokens", "cache_read_input_tokens").usage, without(thought, "input_tokens", "cache_read_input_tokens").usage);
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, thought.usage.input_tokens + thought.usage.cache_read_input_tokens);
    assert.equal(text, m.content.filter((b) => b.type === "text").map((b) => b.text).join(""));
    assert.equal(thinking, m.content.filter((b) => b.type === "thinking").map((b) => b.thinking).join(""));
  });

  await check("create({stream: true}): raw events in Anthropic's order, pings skipped by the SDK", async () => {
    assert.ok(plain, "needs the plain message");
    const types = [];
    let stop = null;
    for await (const e of await client.messages.create({ model, max_tokens: MAX, messages: ASK, stream: true })) {
      types.push(e.type);
      if (e.type === "message_delta") stop = e.delta.stop_reason;
    }
    assert.ok(!types.includes("ping"));
    assertEventGrammar(types);
    assert.equal(stop, plain.stop_reason);
  });

  await check("system prompt, cache_control, metadata, top_k, temperature 0, stop_sequences accepted", async () => {
    const m = await client.messages.create({
      model, max_tokens: 4, messages: ASK, temperature: 0, top_k: 5, top_p: 1, metadata: { user_id: "u" },
      system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }], stop_sequences: ["\u0001never"],
    });
    assert.equal(m.type, "message");
  });

  await check("errors: AuthenticationError, NotFoundError, BadRequestError (sampling, images, prefill), typed", async () => {
    const wrong = new Anthropic({ baseURL, apiKey: "wrong", maxRetries: 0 });
    await expectApiError(() => wrong.messages.create({ model, max_tokens: 2, messages: ASK }),
                         { cls: Anthropic.AuthenticationError, status: 401, type: "authentication_error", mentions: "API key" });
    await expectApiError(() => client.messages.create({ model: "claude-sonnet-5", max_tokens: 2, messages: ASK }),
                         { cls: Anthropic.NotFoundError, status: 404, type: "not_found_error", mentions: "claude-sonnet-5" });
    await expectApiError(() => client.messages.create({ model, max_tokens: 2, messages: ASK, temperature: 0.7 }),
                         { cls: Anthropic.BadRequestError, status: 400, type: "invalid_request_error", mentions: "temperature" });
    await expectApiError(() => client.messages.create({
      model, max_tokens: 2,
      messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }],
    }), { cls: Anthropic.BadRequestError, status: 400, type: "invalid_request_error", mentions: "messages[0].content[0].type" });
    await expectApiError(() => client.messages.create({
      model, max_tokens: 2, messages: [...ASK, { role: "assistant", content: "Paris is" }],
    }), { cls: Anthropic.BadRequestError, status: 400, type: "invalid_request_error", mentions: "messages[1]" });
    await expectApiError(() => client.messages.stream({ model, max_tokens: 2, messages: ASK, thinking: { type: "enabled", budget_tokens: 1024 } }).finalMessage(),
                         { cls: Anthropic.BadRequestError, status: 400, type: "invalid_request_error", mentions: "budget_tokens" });
  });
} else if (mode === "scripted") {
  const expectedInput = JSON.parse(env("DELTAFIN_TEST_CALL_ARGUMENTS"));
  const tools = [{ name: "get_weather", description: "Weather for a city",
                   input_schema: { type: "object", properties: { city: { type: "string" }, days: { type: "number" } } } }];
  const WEATHER = [{ role: "user", content: "Weather in Paris?" }];
  // The script starts after Qwen3's generation prompt as it ends with
  // thinking on; with thinking off the template adds an empty think block.
  const thinking = { type: "adaptive" };

  let call = null;
  await check("messages.create: a typed tool_use block with its input as an object, stop_reason tool_use", async () => {
    const m = await client.messages.create({ model, max_tokens: 32, messages: WEATHER, tools, thinking });
    assert.equal(m.stop_reason, "tool_use");
    assert.equal(m.content.length, 1, JSON.stringify(m.content));
    const use = m.content[0];
    assert.equal(use.type, "tool_use");
    assert.equal(use.name, "get_weather");
    assert.ok(use.id.startsWith("toolu_"), use.id);
    assert.deepEqual(use.input, expectedInput);
    call = m;
  });

  await check("messages.stream: the assembled tool_use, inputJson events, finalMessage equal to create's", async () => {
    assert.ok(call, "needs the created call");
    let json = "";
    const stream = client.messages.stream({ model, max_tokens: 32, messages: WEATHER, tools, thinking }).on("inputJson", (delta) => (json += delta));
    const m = await stream.finalMessage();
    assert.deepEqual(JSON.parse(json), expectedInput);
    assert.deepEqual(without(m, "input_tokens", "cache_read_input_tokens").content.map((b) => ({ ...b, id: "" })),
                     call.content.map((b) => ({ ...b, id: "" })));
    assert.equal(m.stop_reason, "tool_use");
  });

  await check("a round trip: the tool_use and its tool_result sent back are accepted and answered", async () => {
    assert.ok(call, "needs the created call");
    const use = call.content[0];
    const m = await client.messages.create({
      model, max_tokens: 32, tools, thinking,
      messages: [...WEATHER, { role: "assistant", content: call.content },
                 { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "Sunny, 21 C" }] }],
    });
    assert.equal(m.stop_reason, "tool_use");
    assert.ok(m.usage.input_tokens + m.usage.cache_read_input_tokens > call.usage.input_tokens + call.usage.cache_read_input_tokens);
    await expectApiError(() => client.messages.create({
      model, max_tokens: 32, tools, thinking,
      messages: [...WEATHER, { role: "assistant", content: call.content },
                 { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_other", content: "?" }] }],
    }), { cls: Anthropic.BadRequestError, status: 400, type: "invalid_request_error", mentions: "tool_use_id" });
  });

  await check("tool_choice auto with disable_parallel_tool_use; any and tool refused (Qwen3's template cannot ask for a call); none; an error result", async () => {
    const m = await client.messages.create({ model, max_tokens: 32, messages: WEATHER, tools, thinking,
                                             tool_choice: { type: "auto", disable_parallel_tool_use: true } });
    assert.equal(m.stop_reason, "tool_use");
    for (const tool_choice of [{ type: "tool", name: "get_weather" }, { type: "any" }]) {
      await expectApiError(() => client.messages.create({ model, max_tokens: 32, messages: WEATHER, tools, tool_choice, thinking }),
                           { cls: Anthropic.BadRequestError, status: 400, type: "invalid_request_error", mentions: "tool_choice" });
    }
    const none = await client.messages.countTokens({ model, messages: WEATHER, tools, tool_choice: { type: "none" } });
    const bare = await client.messages.countTokens({ model, messages: WEATHER });
    assert.equal(none.input_tokens, bare.input_tokens, "tool_choice none leaves the tools out of Qwen3's prompt");
    const use = call.content[0];
    const failed = await client.messages.countTokens({
      model, tools, messages: [...WEATHER, { role: "assistant", content: call.content },
                               { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "boom", is_error: true }] }],
    });
    assert.ok(failed.input_tokens > bare.input_tokens);
  });

  await check("output_config.format: refused for Qwen3, whose template has no schema path, naming the field", async () => {
    await expectApiError(() => client.messages.create({
      model, max_tokens: 8, messages: WEATHER, output_config: { format: { type: "json_schema", schema: { type: "object" } } },
    }), { cls: Anthropic.BadRequestError, status: 400, type: "invalid_request_error", mentions: "output_config.format" });
  });
} else {
  console.error(`messages_test.mjs: DELTAFIN_TEST_MODE must be random or scripted, not ${mode}`);
  process.exit(2);
}

if (failures.length > 0) {
  console.log(`${failures.length} check(s) failed: ${failures.join("; ")}`);
  process.exit(1);
}
console.log("all checks passed");
