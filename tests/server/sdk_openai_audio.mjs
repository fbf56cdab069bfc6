// Drives `brisk serve`'s audio routes with the official OpenAI SDK. Env: BRISK_URL
// (http://host:port/v1), BRISK_KEY, BRISK_MODEL (a speech model), BRISK_AUDIO (a WAV file).
// Exits non-zero with a message on the first failed check.
import OpenAI, { toFile } from "openai";
import assert from "node:assert/strict";
import fs from "node:fs";

const client = new OpenAI({ baseURL: process.env.BRISK_URL, apiKey: process.env.BRISK_KEY });
const model = process.env.BRISK_MODEL;
const audio = fs.readFileSync(process.env.BRISK_AUDIO);
const file = () => toFile(audio, "speech.wav", { type: "audio/wav" });

const j = await client.audio.transcriptions.create({ model, file: await file() });
assert.equal(typeof j.text, "string", "json: text");
assert.equal(j.usage.type, "duration");

const t = await client.audio.transcriptions.create({ model, file: await file(), response_format: "text" });
assert.equal(typeof t, "string", "text: a string");
assert.ok(t.endsWith("\n"), "text ends with a newline");

const srt = await client.audio.transcriptions.create({ model, file: await file(), response_format: "srt" });
assert.match(srt, /^1\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\n/, "srt cue");

const v = await client.audio.transcriptions.create({
  model, file: await file(), response_format: "verbose_json", timestamp_granularities: ["word", "segment"],
});
assert.equal(v.task, "transcribe");
assert.ok(Array.isArray(v.segments) && v.segments.length > 0, "verbose_json segments");
assert.ok(Array.isArray(v.words), "verbose_json words");
for (const s of v.segments) assert.ok(s.start <= s.end, "segment times");

const stream = await client.audio.transcriptions.create({ model, file: await file(), stream: true });
let deltas = "";
let done = null;
for await (const event of stream) {
  if (event.type === "transcript.text.delta") deltas += event.delta;
  if (event.type === "transcript.text.done") done = event;
}
assert.ok(done, "stream: a done event");
assert.equal(deltas, done.text, "stream: deltas add up to the text");

const tr = await client.audio.translations.create({ model, file: await file() });
assert.equal(typeof tr.text, "string", "translation: text");

try {
  await client.audio.transcriptions.create({ model, file: await file(), language: "xx" });
  assert.fail("unknown language accepted");
} catch (e) {
  assert.equal(e.status, 400);
}
console.log("openai sdk audio: ok");
