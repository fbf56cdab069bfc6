// Drives `brisk serve` with the official OpenAI SDK. Env: BRISK_URL (http://host:port/v1),
// BRISK_KEY, BRISK_MODEL. Exits non-zero with a message on the first failed check.
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ baseURL: process.env.BRISK_URL, apiKey: process.env.BRISK_KEY });
const model = process.env.BRISK_MODEL;
const messages = [{ role: "user", content: "Hello there" }];

const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model), "model listed");

const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
assert.equal(r.choices[0].finish_reason, "length");
assert.equal(r.usage.completion_tokens, 8);
const text = r.choices[0].message.content;

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let streamed = "";
let usage = null;
for await (const chunk of stream) {
  if (chunk.choices.length) streamed += chunk.choices[0].delta.content ?? "";
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(streamed, text, "stream == non-stream");
assert.equal(usage.completion_tokens, 8, "usage in the final chunk");

const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
for (const tool_choice of ["auto", "none", "required", { type: "function", function: { name: "get_weather" } }]) {
  const t = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Weather in Oslo?" }], tools, tool_choice, max_tokens: 64, temperature: 0 });
  const msg = t.choices[0].message;
  if (tool_choice === "none") assert.ok(!msg.tool_calls, "tool_choice none gives no call");
  if (typeof tool_choice !== "string" || tool_choice === "required") {
    if (t.choices[0].finish_reason !== "length") {
      assert.equal(msg.tool_calls[0].function.name, "get_weather");
      JSON.parse(msg.tool_calls[0].function.arguments);
      assert.equal(t.choices[0].finish_reason, "tool_calls");
    }
  }
}

const j = await client.chat.completions.create({ model, messages, max_tokens: 200, temperature: 0, response_format: { type: "json_object" } });
if (j.choices[0].finish_reason === "stop") assert.equal(typeof JSON.parse(j.choices[0].message.content), "object");

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
console.log("openai sdk: ok");
