// The official `openai` npm package reading tool calls from `deltafin serve`,
// against a scripted checkpoint (make-model --arch qwen3_moe --script, whose
// greedy answer to any chat is one get_weather call): the SDK's typed
// message.tool_calls, its stream helper's assembled calls, and a round trip
// with the tool's result. openai_client_test.cpp makes the model, starts the
// server and runs this next to the package:
//
//   DELTAFIN_TEST_BASE_URL, DELTAFIN_TEST_API_KEY, DELTAFIN_TEST_MODEL (as client_test.mjs)
//   DELTAFIN_TEST_CALL_ARGUMENTS=JSON     the arguments object the script writes
//   node tool_calls_test.mjs
import OpenAI from "openai";
import assert from "node:assert/strict";

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`tool_calls_test.mjs: set ${name}`);
    process.exit(2);
  }
  return v;
};
const client = new OpenAI({ baseURL: env("DELTAFIN_TEST_BASE_URL") + "/v1", apiKey: env("DELTAFIN_TEST_API_KEY"),
                            maxRetries: 0, timeout: 60_000 });
const model = env("DELTAFIN_TEST_MODEL");
const expectedArguments = JSON.parse(env("DELTAFIN_TEST_CALL_ARGUMENTS"));

const tools = [{ type: "function", function: { name: "get_weather", description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "number" } } } } }];
const messages = [{ role: "user", content: "Weather in Paris?" }];

const failures = [];
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures.push(name);
    console.log(`FAIL ${name}\n     ${String(e?.stack ?? e).split("\n").join("\n     ")}`);
  }
}

function assertTheCall(call) {
  assert.equal(call.type, "function");
  assert.match(call.id, /^call_/);
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), expectedArguments);
}

let firstCall = null;
await check("chat.completions.create with tools: message.tool_calls, content null, finish_reason tool_calls", async () => {
  const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 32 });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  assertTheCall(choice.message.tool_calls[0]);
  firstCall = choice.message.tool_calls[0];
});

await check("streamed: the SDK's stream helper assembles the same call from delta.tool_calls", async () => {
  const stream = client.beta.chat.completions.stream({ model, messages, tools, max_tokens: 32 });
  const done = await stream.finalChatCompletion();
  const choice = done.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.tool_calls.length, 1);
  assertTheCall(choice.message.tool_calls[0]);
});

await check("streamed raw chunks: index, then id/type/name first, then arguments pieces", async () => {
  const chunks = [];
  for await (const c of await client.chat.completions.create({ model, messages, tools, max_tokens: 32, stream: true })) chunks.push(c);
  const pieces = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  assert.ok(pieces.length >= 2, JSON.stringify(pieces));
  assert.equal(pieces[0].index, 0);
  assert.equal(pieces[0].type, "function");
  assert.equal(pieces[0].function.name, "get_weather");
  for (const p of pieces.slice(1)) assert.equal(p.id, undefined);
  assert.deepEqual(JSON.parse(pieces.map((p) => p.function.arguments ?? "").join("")), expectedArguments);
  assert.equal(chunks.at(-1).choices[0].finish_reason, "tool_calls");
});

await check("round trip: the call in history and the tool's result are accepted and answered", async () => {
  assert.ok(firstCall, "no call from the first check");
  const r = await client.chat.completions.create({
    model, tools, max_tokens: 32,
    messages: [...messages, { role: "assistant", content: null, tool_calls: [firstCall] },
               { role: "tool", tool_call_id: firstCall.id, content: "Sunny, 21 C" }],
  });
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assertTheCall(r.choices[0].message.tool_calls[0]);
  assert.ok(r.usage.prompt_tokens > 20, JSON.stringify(r.usage));
});

await check("parallel_tool_calls false and tool_choice auto are accepted with the same call", async () => {
  const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 32, parallel_tool_calls: false,
                                                   tool_choice: "auto" });
  assertTheCall(r.choices[0].message.tool_calls[0]);
});

if (failures.length) {
  console.log(`${failures.length} check(s) failed: ${failures.join("; ")}`);
  process.exit(1);
}
