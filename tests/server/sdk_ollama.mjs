// Drives `brisk serve` with the official `ollama` npm client. Env: BRISK_OLLAMA_HOST
// (http://host:port), BRISK_KEY, BRISK_MODEL (a served name), BRISK_PULL (a Hub reference the
// local test Hub serves). Checks every response field the client's types declare, with its
// type. Exits non-zero with a message on the first failed check.
import { Ollama } from "ollama";
import assert from "node:assert/strict";

const ollama = new Ollama({ host: process.env.BRISK_OLLAMA_HOST, headers: { Authorization: `Bearer ${process.env.BRISK_KEY}` } });
const model = process.env.BRISK_MODEL;
const messages = [{ role: "user", content: "Hello there" }];
const greedy = { temperature: 0, num_predict: 8 };

const isNum = (v, what) => assert.equal(typeof v, "number", `${what}: ${JSON.stringify(v)}`);
const isStr = (v, what) => assert.equal(typeof v, "string", `${what}: ${JSON.stringify(v)}`);
function checkFinal(r, what) {
  assert.equal(r.done, true, what);
  isStr(r.done_reason, `${what}.done_reason`);
  isStr(r.model, `${what}.model`);
  assert.ok(!Number.isNaN(Date.parse(r.created_at)), `${what}.created_at ${r.created_at}`);
  for (const k of ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"]) {
    isNum(r[k], `${what}.${k}`);
    assert.ok(Number.isInteger(r[k]) && r[k] >= 0, `${what}.${k} = ${r[k]}`);
  }
  assert.ok(r.total_duration >= r.eval_duration, `${what}: total_duration >= eval_duration`);
}
function checkDetails(d, what) {
  for (const k of ["parent_model", "format", "family", "parameter_size", "quantization_level"]) isStr(d[k], `${what}.${k}`);
}

// chat, not streamed, then streamed: the same greedy text.
const noThink = { think: false };
const r = await ollama.chat({ model, messages, options: greedy, ...noThink });
checkFinal(r, "chat");
assert.equal(r.message.role, "assistant");
isStr(r.message.content, "chat.message.content");
assert.equal(r.done_reason, "length");
assert.equal(r.eval_count, 8);
assert.ok(r.prompt_eval_count > 0);

let streamed = "";
let last = null;
let pieces = 0;
for await (const part of await ollama.chat({ model, messages, options: greedy, stream: true, ...noThink })) {
  assert.ok(!Number.isNaN(Date.parse(part.created_at)));
  if (!part.done) {
    isStr(part.message.content, "streamed piece");
    streamed += part.message.content;
    pieces++;
  }
  last = part;
}
checkFinal(last, "chat stream final");
assert.equal(streamed, r.message.content, "stream == non-stream");
assert.ok(pieces >= 2, `streamed in pieces (${pieces})`);

// generate, both ways; `context` is token ids.
const g = await ollama.generate({ model, prompt: "Once upon a time", options: greedy, think: false });
checkFinal(g, "generate");
isStr(g.response, "generate.response");
assert.ok(Array.isArray(g.context) && g.context.length > 0 && g.context.every(Number.isInteger), "generate.context");
let gText = "";
for await (const part of await ollama.generate({ model, prompt: "Once upon a time", options: greedy, think: false, stream: true })) {
  if (!part.done) gText += part.response;
  else checkFinal(part, "generate stream final");
}
assert.equal(gText, g.response, "generate stream == non-stream");
const raw = await ollama.generate({ model, prompt: "abc", raw: true, options: { ...greedy, num_predict: 3 } });
assert.equal(raw.eval_count, 3, "raw generate");

// stop strings end the answer before them; seed makes sampling repeatable.
const seeded = { temperature: 1.0, seed: 42, num_predict: 12 };
const s1 = await ollama.chat({ model, messages, options: seeded, ...noThink });
const s2 = await ollama.chat({ model, messages, options: seeded, ...noThink });
assert.equal(s1.message.content, s2.message.content, "seeded chats agree");

// tools: the call comes back as {function: {name, arguments: object}}.
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: {
  type: "object", properties: { city: { type: "string", enum: ["Oslo", "Rome"] } }, required: ["city"] } } }];
// The random fixture rarely calls a tool by itself: a tool turn in the history checks the
// request side, a schema-constrained format the output side.
const history = [
  { role: "user", content: "Weather in Oslo?" },
  { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Oslo" } } }] },
  { role: "tool", content: "12 degrees", tool_name: "get_weather" },
];
const t = await ollama.chat({ model, messages: history, tools, options: greedy, ...noThink });
checkFinal(t, "chat with tools");
if (t.message.tool_calls) {
  for (const c of t.message.tool_calls) {
    isStr(c.function.name, "tool_calls[].function.name");
    assert.equal(typeof c.function.arguments, "object");
  }
}

// format: a JSON schema, enforced.
const schema = { type: "object", properties: { city: { type: "string", enum: ["Oslo", "Rome"] }, days: { type: "integer", minimum: 1, maximum: 9 } },
  required: ["city", "days"], additionalProperties: false };
const f = await ollama.chat({ model, messages: [{ role: "user", content: "Forecast?" }], format: schema,
  options: { temperature: 1.0, seed: 7, num_predict: 64 }, ...noThink });
const parsed = JSON.parse(f.message.content);
assert.ok(["Oslo", "Rome"].includes(parsed.city) && Number.isInteger(parsed.days) && parsed.days >= 1 && parsed.days <= 9, f.message.content);
const fj = await ollama.generate({ model, prompt: "json please", format: "json", options: { temperature: 1.0, seed: 3, num_predict: 48 }, think: false });
// A random model may not close its object within num_predict: then it is a JSON prefix.
assert.ok(fj.response.startsWith("{"), fj.response);
if (fj.done_reason === "stop") assert.equal(typeof JSON.parse(fj.response), "object", fj.response);

// list, show, ps, version.
const list = await ollama.list();
const entry = list.models.find((m) => m.name === `${model}:latest`);
assert.ok(entry, JSON.stringify(list));
isStr(entry.model, "tags.model");
isNum(entry.size, "tags.size");
assert.ok(entry.size > 0);
assert.match(entry.digest, /^[0-9a-f]{64}$/);
assert.ok(!Number.isNaN(Date.parse(entry.modified_at)));
checkDetails(entry.details, "tags.details");
assert.equal(entry.details.format, "safetensors");

const show = await ollama.show({ model: `${model}:latest` });
for (const k of ["license", "modelfile", "parameters", "template"]) isStr(show[k], `show.${k}`);
assert.ok(show.template.length > 0, "show.template");
checkDetails(show.details, "show.details");
assert.equal(show.details.family, "qwen3");
assert.ok(Array.isArray(show.capabilities) && show.capabilities.includes("completion"), JSON.stringify(show.capabilities));
assert.equal(typeof show.model_info, "object");
assert.equal(show.model_info["general.architecture"], "qwen3");
isNum(show.model_info["qwen3.context_length"], "model_info context_length");

const ps = await ollama.ps();
const running = ps.models.find((m) => m.name === `${model}:latest`);
assert.ok(running, JSON.stringify(ps));
assert.ok(!Number.isNaN(Date.parse(running.expires_at)));
isNum(running.size_vram, "ps.size_vram");
checkDetails(running.details, "ps.details");

const v = await ollama.version();
assert.match(v.version, /^\d+\.\d+\.\d+/);

// embed: refused until embedding models exist.
await assert.rejects(ollama.embed({ model, input: "hello" }), /embeddings are not supported by this model/);
await assert.rejects(ollama.embeddings({ model, prompt: "hello" }), /embeddings are not supported by this model/);
// errors reach the client as messages.
await assert.rejects(ollama.chat({ model: "no-such-model", messages }), /not found/);
await assert.rejects(ollama.chat({ model, messages: [{ role: "user", content: "x", images: ["aGk="] }] }), /vision/);

// pull from the local test Hub: progress lines, then the model chats under that name.
if (process.env.BRISK_PULL) {
  const ref = process.env.BRISK_PULL;
  const statuses = [];
  let sawBytes = false;
  for await (const p of await ollama.pull({ model: ref, stream: true })) {
    isStr(p.status, "pull.status");
    statuses.push(p.status);
    if (p.digest) {
      isStr(p.digest, "pull.digest");
      isNum(p.total, "pull.total");
      isNum(p.completed, "pull.completed");
      assert.ok(p.completed <= p.total);
      sawBytes ||= p.completed > 0;
    }
  }
  assert.equal(statuses[0], "pulling manifest", statuses.join(", "));
  assert.equal(statuses.at(-1), "success", statuses.join(", "));
  assert.ok(sawBytes, "pull reported bytes");
  const after = await ollama.list();
  assert.ok(after.models.some((m) => m.name === `${ref}:latest`), JSON.stringify(after));
  const pr = await ollama.chat({ model: `${ref}:latest`, messages, options: greedy, ...noThink });
  assert.equal(pr.message.content, r.message.content, "the pulled copy answers as the original");
  const again = await ollama.pull({ model: ref, stream: false });
  assert.equal(again.status, "success");
  await ollama.delete({ model: ref });
  const gone = await ollama.list();
  assert.ok(!gone.models.some((m) => m.name === `${ref}:latest`), "deleted");
  await assert.rejects(ollama.delete({ model }), /command line/);
  await assert.rejects(ollama.pull({ model: "test-org/no-such-repo" }), /not found|does not exist/i);
}
console.log("sdk_ollama: ok");
