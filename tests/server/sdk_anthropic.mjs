// Drives `brisk serve` with the official Anthropic SDK. Env: BRISK_BASE (http://host:port),
// BRISK_KEY, BRISK_MODEL.
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";

const client = new Anthropic({ baseURL: process.env.BRISK_BASE, apiKey: process.env.BRISK_KEY });
const model = process.env.BRISK_MODEL;
const messages = [{ role: "user", content: "Hello there" }];

const r = await client.messages.create({ model, max_tokens: 8, messages, temperature: 0 });
assert.equal(r.type, "message");
assert.equal(r.stop_reason, "max_tokens");
assert.equal(r.usage.output_tokens, 8);

const stream = client.messages.stream({ model, max_tokens: 8, messages, temperature: 0 });
let text = "";
stream.on("text", (t) => { text += t; });
const final = await stream.finalMessage();
assert.equal(text, r.content[0].text, "stream == non-stream");
assert.equal(final.stop_reason, "max_tokens");

// The Models API shape (the SDK sends anthropic-version).
const listed = [];
for await (const m of client.models.list()) listed.push(m);
const info = listed.find((m) => m.id === model);
assert.ok(info, "model listed");
assert.equal(info.type, "model");
assert.equal(typeof info.display_name, "string");
assert.ok(!Number.isNaN(Date.parse(info.created_at)), "created_at is a date");
assert.equal((await client.models.retrieve(model)).id, model);

// Thinking: adaptive (the model decides) and disabled are accepted.
for (const thinking of [{ type: "adaptive" }, { type: "disabled" }]) {
  const t = await client.messages.create({ model, max_tokens: 4, messages, thinking });
  assert.equal(t.type, "message");
}

// A forced call: the input follows the schema; with max_tokens too small, no markup as text.
const tools = [{ name: "get_weather", description: "weather", input_schema: {
  type: "object", properties: { city: { enum: ["Oslo", "Rome"] } }, required: ["city"], additionalProperties: false } }];
const ask = [{ role: "user", content: "Weather in Oslo?" }];
const t = await client.messages.create({ model, max_tokens: 64, tools, tool_choice: { type: "tool", name: "get_weather" },
  messages: ask, temperature: 0, thinking: { type: "disabled" } });
assert.equal(t.stop_reason, "tool_use", JSON.stringify(t));
const use = t.content.find((b) => b.type === "tool_use");
assert.equal(use.name, "get_weather");
assert.ok(["Oslo", "Rome"].includes(use.input.city));
const t2 = await client.messages.create({ model, max_tokens: 8, tools, temperature: 0, messages: [
  ...ask,
  { role: "assistant", content: t.content },
  { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] },
] });
assert.equal(t2.type, "message");
for (const streamed of [false, true]) {
  const params = { model, max_tokens: 6, tools, tool_choice: { type: "any" }, messages: ask, temperature: 0, thinking: { type: "disabled" } };
  let cut;
  if (streamed) {
    const s = client.messages.stream(params);
    cut = await s.finalMessage();
  } else {
    cut = await client.messages.create(params);
  }
  assert.equal(cut.stop_reason, "max_tokens");
  for (const b of cut.content)
    if (b.type === "text") assert.ok(!b.text.includes("<tool_call>") && !b.text.includes('"name"'), `markup leaked: ${b.text}`);
}

const count = await client.messages.countTokens({ model, messages });
assert.ok(count.input_tokens > 0);
console.log("anthropic sdk: ok");
