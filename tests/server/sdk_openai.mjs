// Drives `brisk serve` with the official OpenAI SDK. Env: BRISK_URL (http://host:port/v1),
// BRISK_KEY, BRISK_MODEL. Exits non-zero with a message on the first failed check.
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ baseURL: process.env.BRISK_URL, apiKey: process.env.BRISK_KEY });
const model = process.env.BRISK_MODEL;
const messages = [{ role: "user", content: "Hello there" }];
// The fixture's template would open a reasoning block the random model need not close.
const noThink = { chat_template_kwargs: { enable_thinking: false } };

const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model), "model listed");

const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
assert.equal(r.choices[0].finish_reason, "length");
assert.equal(r.usage.completion_tokens, 8);
assert.ok("refusal" in r.choices[0].message, "message.refusal present");
assert.equal(r.choices[0].message.refusal, null);
const text = r.choices[0].message.content;

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let streamed = "";
let usage = null;
let firstDelta = null;
for await (const chunk of stream) {
  if (chunk.choices.length) {
    firstDelta ??= chunk.choices[0].delta;
    streamed += chunk.choices[0].delta.content ?? "";
  }
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(streamed, text, "stream == non-stream");
assert.equal(usage.completion_tokens, 8, "usage in the final chunk");
assert.equal(firstDelta.role, "assistant");
assert.equal(firstDelta.refusal, null);

// Tool calls: the arguments follow the schema; a named tool_choice ends with "stop" (as
// OpenAI's does), required with "tool_calls", none with no call.
const tools = [{ type: "function", function: { name: "get_weather", parameters: {
  type: "object", properties: { city: { enum: ["Oslo", "Rome"] } }, required: ["city"], additionalProperties: false } } }];
const weather = [{ role: "user", content: "Weather in Oslo?" }];
for (const [tool_choice, finish] of [["required", "tool_calls"], [{ type: "function", function: { name: "get_weather" } }, "stop"]]) {
  const t = await client.chat.completions.create({ model, messages: weather, tools, tool_choice, max_tokens: 64, temperature: 0, ...noThink });
  const msg = t.choices[0].message;
  assert.equal(t.choices[0].finish_reason, finish, JSON.stringify(t));
  assert.equal(msg.tool_calls.length, 1);
  assert.equal(msg.tool_calls[0].function.name, "get_weather");
  assert.ok(["Oslo", "Rome"].includes(JSON.parse(msg.tool_calls[0].function.arguments).city));
  const s = await client.chat.completions.create({ model, messages: weather, tools, tool_choice, max_tokens: 64, temperature: 0, stream: true, ...noThink });
  let sFinish = null;
  for await (const chunk of s) if (chunk.choices.length && chunk.choices[0].finish_reason) sFinish = chunk.choices[0].finish_reason;
  assert.equal(sFinish, finish, "streamed finish_reason");
}
const none = await client.chat.completions.create({ model, messages: weather, tools, tool_choice: "none", max_tokens: 16, temperature: 0 });
assert.ok(!none.choices[0].message.tool_calls, "tool_choice none gives no call");
// A forced call cut by max_tokens: no call markup in the content, streamed or not.
for (const stream of [false, true]) {
  const cut = await client.chat.completions.create({ model, messages: weather, tools, tool_choice: "required", max_tokens: 6, temperature: 0, stream, ...noThink });
  let content = "";
  if (stream) {
    for await (const chunk of cut) if (chunk.choices.length) content += chunk.choices[0].delta.content ?? "";
  } else {
    assert.equal(cut.choices[0].finish_reason, "length");
    content = cut.choices[0].message.content ?? "";
  }
  assert.ok(!content.includes("<tool_call>") && !content.includes('"name"'), `markup leaked: ${content}`);
}

// Structured output: a schema the model must finish within max_tokens, checked whole.
const schema = { type: "object", properties: { name: { type: "string", maxLength: 8 }, n: { type: "integer", minimum: 1, maximum: 9 } },
  required: ["name", "n"], additionalProperties: false };
const j = await client.chat.completions.create({ model, messages, max_tokens: 200, temperature: 0, ...noThink,
  response_format: { type: "json_schema", json_schema: { name: "thing", schema } } });
assert.equal(j.choices[0].finish_reason, "stop", JSON.stringify(j));
const obj = JSON.parse(j.choices[0].message.content);
assert.ok(obj.name.length <= 8 && Number.isInteger(obj.n) && obj.n >= 1 && obj.n <= 9, JSON.stringify(obj));
const jo = await client.chat.completions.create({ model, messages, max_tokens: 40, temperature: 0, ...noThink, response_format: { type: "json_object" } });
assert.ok(jo.choices[0].message.content.trimStart().startsWith("{"), "json_object starts an object");
for (const bad of [{ type: "json_schema", json_schema: { name: "x" } },
                   { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "^a" } } }]) {
  try {
    await client.chat.completions.create({ model, messages, max_tokens: 4, response_format: bad });
    assert.fail("an unenforceable response_format was accepted");
  } catch (e) {
    assert.equal(e.status, 400);
  }
}

const lp = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2, n: 2 });
assert.equal(lp.choices.length, 2);
assert.equal(lp.choices[0].logprobs.content.length, 4);
assert.equal(lp.choices[0].logprobs.content[0].top_logprobs.length, 2);

const st = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, stop: [text.slice(2, 4)] });
if (text.length >= 4) assert.ok(!st.choices[0].message.content.includes(text.slice(2, 4)), "stop string cut");

try {
  await client.chat.completions.create({ model: "no-such-model", messages, max_tokens: 2 });
  assert.fail("unknown model accepted");
} catch (e) {
  assert.equal(e.status, 404);
}

// Responses API: create, stream, instructions, previous_response_id, function calls.
const resp = await client.responses.create({ model, input: "Hello there", max_output_tokens: 8, temperature: 0, instructions: "Be brief." });
assert.equal(resp.object, "response");
assert.equal(resp.status, "incomplete");
assert.equal(resp.incomplete_details.reason, "max_output_tokens");
assert.equal(resp.usage.output_tokens, 8);
assert.ok(resp.output_text.length > 0, "output_text");
const again = await client.responses.retrieve(resp.id);
assert.equal(again.output_text, resp.output_text);

const rs = client.responses.stream({ model, input: "Hello there", max_output_tokens: 8, temperature: 0, instructions: "Be brief." });
let deltas = "";
const kinds = [];
for await (const event of rs) {
  kinds.push(event.type);
  if (event.type === "response.output_text.delta") deltas += event.delta;
}
const finalResponse = await rs.finalResponse();
assert.equal(kinds[0], "response.created");
assert.equal(kinds.at(-1), "response.incomplete");
assert.equal(deltas, resp.output_text, "streamed == created");
assert.equal(finalResponse.output_text, resp.output_text);

const next = await client.responses.create({ model, input: "And then?", previous_response_id: resp.id, max_output_tokens: 4, temperature: 0 });
assert.ok(next.usage.input_tokens > resp.usage.input_tokens, "the previous turn is in the prompt");

const rtools = [{ type: "function", name: "get_weather", strict: true, parameters: tools[0].function.parameters }];
const call = await client.responses.create({ model, input: "Weather in Oslo?", tools: rtools, tool_choice: "required",
  max_output_tokens: 64, temperature: 0, reasoning: { effort: "none" } });
assert.equal(call.status, "completed", JSON.stringify(call));
const fc = call.output.find((o) => o.type === "function_call");
assert.equal(fc.name, "get_weather");
assert.ok(["Oslo", "Rome"].includes(JSON.parse(fc.arguments).city));
const followUp = await client.responses.create({ model, previous_response_id: call.id, tools: rtools, max_output_tokens: 4, temperature: 0,
  input: [{ type: "function_call_output", call_id: fc.call_id, output: "sunny" }] });
assert.equal(followUp.object, "response");
const cs = client.responses.stream({ model, input: "Weather in Oslo?", tools: rtools, tool_choice: "required",
  max_output_tokens: 64, temperature: 0, reasoning: { effort: "none" } });
let args = "";
for await (const event of cs) if (event.type === "response.function_call_arguments.delta") args += event.delta;
const streamedCall = (await cs.finalResponse()).output.find((o) => o.type === "function_call");
assert.equal(streamedCall.arguments, args);
assert.equal(streamedCall.arguments, fc.arguments);
console.log("openai sdk: ok");
