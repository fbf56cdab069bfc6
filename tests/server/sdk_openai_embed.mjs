// Drives `brisk serve`'s /v1/embeddings with the official OpenAI SDK. Env: BRISK_URL
// (http://host:port/v1), BRISK_KEY, BRISK_MODEL (an embedding model), BRISK_DIM (its width),
// BRISK_IDS (a JSON array of token-id arrays). Exits non-zero on the first failed check.
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ baseURL: process.env.BRISK_URL, apiKey: process.env.BRISK_KEY });
const model = process.env.BRISK_MODEL;
const dim = Number(process.env.BRISK_DIM);
const input = JSON.parse(process.env.BRISK_IDS);

const f = await client.embeddings.create({ model, input, encoding_format: "float" });
assert.equal(f.object, "list");
assert.equal(f.data.length, input.length);
for (const [i, d] of f.data.entries()) {
  assert.equal(d.index, i);
  assert.equal(d.embedding.length, dim, "float: width");
}
assert.equal(f.usage.prompt_tokens, input.reduce((n, x) => n + x.length, 0), "usage.prompt_tokens");

// Without encoding_format the SDK asks for base64 and decodes it: the same numbers.
const b = await client.embeddings.create({ model, input });
for (const [i, d] of b.data.entries()) {
  assert.equal(d.embedding.length, dim, "base64: width");
  for (let k = 0; k < dim; k++) assert.ok(Math.abs(d.embedding[k] - f.data[i].embedding[k]) < 1e-6, "base64 == float");
}

const m = await client.embeddings.create({ model, input: input[0], dimensions: 8, encoding_format: "float" });
assert.equal(m.data.length, 1);
assert.equal(m.data[0].embedding.length, 8, "dimensions");

try {
  await client.embeddings.create({ model, input: "text needs a tokenizer" });
  assert.fail("text accepted without a tokenizer");
} catch (e) {
  assert.equal(e.status, 400);
  assert.match(e.message, /tokenizer/);
}
console.log("openai sdk embeddings: ok");
