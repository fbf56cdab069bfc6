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

const tools = [{ name: "get_weather", description: "weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];
const t = await client.messages.create({ model, max_tokens: 64, tools, tool_choice: { type: "tool", name: "get_weather" },
  messages: [{ role: "user", content: "Weather in Oslo?" }], temperature: 0 });
if (t.stop_reason === "tool_use") {
  const use = t.content.find((b) => b.type === "tool_use");
  assert.equal(use.name, "get_weather");
  const t2 = await client.messages.create({ model, max_tokens: 8, tools, temperature: 0, messages: [
    { role: "user", content: "Weather in Oslo?" },
    { role: "assistant", content: t.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] },
  ] });
  assert.equal(t2.type, "message");
}

const count = await client.messages.countTokens({ model, messages });
assert.ok(count.input_tokens > 0);
console.log("anthropic sdk: ok");
