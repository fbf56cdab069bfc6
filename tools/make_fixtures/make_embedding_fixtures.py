#!/usr/bin/env python3
"""Embedding and reranking fixtures: tiny random-weight checkpoints with float32 references made by
transformers and sentence-transformers (run on a machine that has torch, transformers >= 5.17 and
sentence-transformers; nothing is downloaded, everything is built from the configs below).

Usage:
  python3 tools/make_fixtures/make_embedding_fixtures.py --out tests/fixtures/models [--only NAME ...]
  python3 tools/make_fixtures/make_embedding_fixtures.py --dry-run     (prints the plan; no torch needed)

It writes OUT/NAME/ for each family below, each well under 1 MB (hidden 32, intermediate 64,
2 layers, vocabulary 512, float32):
  embed_bert_cls     BertModel; CLS pooling + Normalize; a sentence-pair input with token types 0/1
  embed_xlmr_mean    XLMRobertaModel (multilingual-e5 / bge-m3 shape); mean pooling + Normalize;
                     positions start at padding_idx + 1 = 2 and padded positions stay at 1
  embed_nomic        NomicBertModel (transformers' own port; skipped when the installed transformers
                     has none); mean pooling + Normalize; search_query / search_document prompts
  embed_modernbert   ModernBertModel; layer 0 global, layer 1 local with local_attention 16 (8 each
                     side), shorter than the 77-token input; mean pooling + Normalize
  embed_qwen3        Qwen3Model (Qwen3-Embedding): last-token pooling + Normalize, <|endoftext|>
                     appended to every input, the "query" instruction prompt on inputs 0 and 3,
                     left padding in the batch
  embed_gemma        Gemma3TextModel with use_bidirectional_attention (EmbeddingGemma): mean pooling,
                     2_Dense (32 -> 128) and 3_Dense (128 -> 32), no bias, identity activation,
                     4_Normalize; sliding layer with window 16 in config.json under a 70-token input
  rerank_xlmr        XLMRobertaForSequenceClassification, 1 label (bge-reranker): CrossEncoder score
                     = sigmoid(logit), pairs joined as <s> q </s></s> d </s>
  rerank_qwen3       Qwen3ForCausalLM (Qwen3-Reranker): score = softmax(logit[no], logit[yes])[yes] at
                     the last position of the model card's prompt format (QWEN3_RERANK_* below), left
                     padding in the batch

Weights: every tensor of two or more dimensions (embeddings included) is N(0, 0.08^2); every 1-D
tensor whose name contains "norm" in any case (LayerNorm, RMSNorm, q_norm, ...) is its initial value
(1 for LayerNorm/RMSNorm gains, 0 for biases and for Gemma's (1 + w) gains) plus N(0, 0.2^2); every
other 1-D tensor (biases) is N(0, 0.1^2). Tied embeddings are tied again afterwards. The Dense
modules' weights are N(0, 0.08^2) from a second generator seeded with seed + 1000. Each family
has its own seed; the token ids come from Python's random.Random(seed), so --dry-run prints the
same ids the real run uses. Everything runs on the CPU in float32 with eager attention.

There are no tokenizer files: every input is token ids, with the special ids each family's
tokenizer would add already in place (listed in ref.json's special_ids).

OUT/NAME/hf/ (embedding families): the sentence-transformers folder layout
  modules.json                       [{"idx", "name", "path", "type"}], types
                                     sentence_transformers.models.{Transformer,Pooling,Dense,Normalize}
  config_sentence_transformers.json  model_type, __version__, prompts, default_prompt_name,
                                     similarity_fn_name ("cosine")
  sentence_bert_config.json          max_seq_length, do_lower_case
  config.json, model.safetensors     save_pretrained of the backbone (float32)
  1_Pooling/config.json              written by sentence_transformers.models.Pooling.save
  2_Dense/, 3_Dense/ (embed_gemma)   config.json (in_features, out_features, bias,
                                     activation_function) + model.safetensors (linear.weight
                                     [out, in]), written by sentence_transformers.models.Dense.save
  N_Normalize/                       empty, as sentence-transformers saves it
OUT/NAME/hf/ (rerankers): save_pretrained only; rerank_xlmr's config.json carries
  "sentence_transformers": {"activation_fn": "torch.nn.modules.activation.Sigmoid", "version"} as
  CrossEncoder saves it.

OUT/NAME/ref.json (numbers are float32 values; parse them as float32, compare by max abs diff):
  name, kind ("embedding" | "rerank_classifier" | "rerank_causal_yes_no"), generator (this script
  and versions), versions {python, torch, transformers, sentence_transformers}, seed, date,
  weights (the scheme above), covers (what the folder exercises), model_class, config_class
  special_ids        the ids the family's tokenizer adds (cls, sep, bos, eos, pad, ...)
  inputs             list of 3-5 token-id lists, the complete model inputs (specials and prompt ids
                     included; rerankers: query and document already joined); lengths all differ,
                     one is longer than 64; the first is the one last_hidden_state describes
  token_type_ids     (embed_bert_cls, embed_nomic) one list per input, same lengths
  prompt_names       one per input: null or the key of config_sentence_transformers.json "prompts"
                     whose text the input starts with (after the family's leading special id)
  prompt_ids         {name: ids} the ids that stand for each prompt text in these inputs
  padding_side       "right" | "left": how the reference batch was padded (pad id special_ids.pad,
                     attention mask 0 there)
  max_seq_length     as sentence_bert_config.json
  pooling            "cls" | "mean" | "lasttoken"; dense: [{in_features, out_features, bias,
                     activation_function}] in module order; normalize: true when a Normalize module
                     ends the pipeline
  last_hidden_state, last_hidden_state_shape   the backbone's output for inputs[0] alone (no
                     padding), row-major [T, hidden], flattened
  pooled             per input, the Pooling output (before Dense and Normalize)
  embeddings         per input, what SentenceTransformer.encode returns: the modules run on the
                     padded batch of all inputs, fed as input_ids / attention_mask
                     (/ token_type_ids) tensors; embedding_dim is its width
  runtime_config     what transformers used after reading config.json: layer_types, sliding_window
                     (Gemma 3 with use_bidirectional_attention turns config.json's W into W // 2 + 1;
                     ModernBERT's property is local_attention // 2), local_attention, rope_parameters,
                     use_bidirectional_attention, query_pre_attn_scalar, head_dim, where the config has them
  attention_reach    measured, not read: for each layer, the largest distance back ("back") and ahead
                     ("forward") at which the eager attention probabilities of the longest input (run
                     alone, index measured_on_input) are nonzero. A causal layer has forward 0, a
                     full bidirectional one T - 1 both ways, a sliding layer its exact window bound
  rerankers: pairs [{query_ids, document_ids}] (the content ids before joining); logits (the
                     classifier's raw output, rerank_xlmr) or yes_minus_no (rerank_qwen3) per pair;
                     scores per pair (sigmoid of the logit / P(yes)); activation; yes_id, no_id,
                     prefix_ids, suffix_ids, instruction_ids, prompt_template (rerank_qwen3);
                     last_logits: the full vocabulary logits after inputs[0] alone (rerank_qwen3)
  checks             reload_max_abs_diff (the saved folder, reloaded with from_pretrained, gives
                     the same last_hidden_state: 0 expected), alone_vs_batched_max_abs_diff
                     (each input run alone vs in the padded batch), st_roundtrip (the saved folder
                     loaded by SentenceTransformer / CrossEncoder with a throwaway word-level
                     tokenizer over "t<id>" words and run through encode() / predict(): max abs
                     diff against embeddings / scores, or the error it raised)
"""
import argparse
import datetime
import json
import os
import platform
import random
import shutil
import sys
import tempfile

SCRIPT = "tools/make_fixtures/make_embedding_fixtures.py"
VOCAB = 512
HIDDEN = 32
INTER = 64
LAYERS = 2
MAX_BYTES = 1 << 20
WEIGHTS = ("matrices N(0, 0.08^2); 1-D tensors named *norm* (any case): initial value + N(0, 0.2^2); "
           "other 1-D tensors N(0, 0.1^2); torch.Generator seeded with seed")

QWEN3_QUERY_PROMPT = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
QWEN3_RERANK_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
                       "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
                       "<|im_start|>user\n")
QWEN3_RERANK_BODY = "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}"
QWEN3_RERANK_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

BERT_IDS = {"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103}
XLMR_IDS = {"bos": 0, "cls": 0, "pad": 1, "eos": 2, "sep": 2, "unk": 3}
MODERNBERT_IDS = {"cls": 1, "bos": 1, "sep": 2, "eos": 2, "pad": 3, "unk": 4, "mask": 5}
QWEN3_IDS = {"eos": 5, "pad": 5, "im_start": 6, "im_end": 7, "yes": 8, "no": 9, "think": 10, "end_think": 11,
             "newline": 12}
GEMMA_IDS = {"pad": 0, "eos": 1, "bos": 2, "unk": 3}
CONTENT_LO = 16  # content ids are drawn from [CONTENT_LO, VOCAB) minus the family's special ids

BERT_SHAPE = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=2,
                  intermediate_size=INTER, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

# Each family: classes, config kwargs (plus optional ones passed only where the installed config
# class knows the key), the sentence-transformers pipeline and the inputs as segment lengths.
FAMILIES = {
    "embed_bert_cls": dict(
        seed=4601, kind="embedding", join="bert", special=BERT_IDS,
        config_class="BertConfig", model_class="BertModel",
        config=dict(BERT_SHAPE, max_position_embeddings=128, type_vocab_size=2, hidden_act="gelu",
                    layer_norm_eps=1e-12, pad_token_id=0),
        pooling="cls", dense=[], normalize=True, padding_side="right", max_seq_length=128,
        prompts={}, inputs=[dict(seg=[9]), dict(seg=[6, 11]), dict(seg=[1]), dict(seg=[75])],
        covers="BERT encoder, CLS pooling + Normalize, token types (input 1 is a sentence pair: types 0 up to and "
               "including the first [SEP], 1 after), absolute positions"),
    "embed_xlmr_mean": dict(
        seed=4602, kind="embedding", join="xlmr", special=XLMR_IDS,
        config_class="XLMRobertaConfig", model_class="XLMRobertaModel",
        config=dict(BERT_SHAPE, max_position_embeddings=130, type_vocab_size=1, hidden_act="gelu",
                    layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2),
        pooling="mean", dense=[], normalize=True, padding_side="right", max_seq_length=128,
        prompts={}, inputs=[dict(seg=[12]), dict(seg=[4]), dict(seg=[78]), dict(seg=[27])],
        covers="XLM-RoBERTa encoder (multilingual-e5 / bge-m3 shape): position ids padding_idx + 1 + i = 2 + i, "
               "padded positions get padding_idx 1; one token type; mean pooling over the mask + Normalize"),
    "embed_nomic": dict(
        seed=4603, kind="embedding", join="bert", special=BERT_IDS, needs_class="NomicBertModel",
        config_class="NomicBertConfig", model_class="NomicBertModel",
        config=dict(BERT_SHAPE, max_position_embeddings=128, type_vocab_size=2, hidden_act="silu",
                    layer_norm_eps=1e-12, pad_token_id=0),
        optional_config=dict(rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
                             rotary_emb_fraction=1.0, rotary_emb_base=1000),
        pooling="mean", dense=[], normalize=True, padding_side="right", max_seq_length=128,
        prompts={"query": "search_query: ", "document": "search_document: "},
        prompt_lengths={"query": 3, "document": 4},
        inputs=[dict(seg=[10], prompt="query"), dict(seg=[70], prompt="document"), dict(seg=[2], prompt="query"),
                dict(seg=[24], prompt="document")],
        covers="NomicBERT (rotary positions, SwiGLU MLP, post-norm), search_query / search_document prompts, "
               "mean pooling + Normalize"),
    "embed_modernbert": dict(
        seed=4604, kind="embedding", join="modernbert", special=MODERNBERT_IDS,
        config_class="ModernBertConfig", model_class="ModernBertModel",
        config=dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                    num_attention_heads=2, hidden_activation="gelu", max_position_embeddings=128, norm_eps=1e-5,
                    norm_bias=False, pad_token_id=3, eos_token_id=2, bos_token_id=1, cls_token_id=1,
                    sep_token_id=2, local_attention=16, global_attn_every_n_layers=2, global_rope_theta=160000.0,
                    local_rope_theta=10000.0, classifier_pooling="mean", reference_compile=False,
                    tie_word_embeddings=True),
        optional_config=dict(layer_types=["full_attention", "sliding_attention"]),
        pooling="mean", dense=[], normalize=True, padding_side="right", max_seq_length=128,
        prompts={}, inputs=[dict(seg=[20]), dict(seg=[75]), dict(seg=[5]), dict(seg=[40])],
        covers="ModernBERT: layer 0 global (rope theta 160000), layer 1 local (local_attention 16: 8 each side, "
               "rope theta 10000) under inputs of 42 and 77 tokens; GeGLU (Wi is [2 x 64, 32]); LayerNorm without "
               "bias; mean pooling + Normalize"),
    "embed_qwen3": dict(
        seed=4605, kind="embedding", join="qwen3_embed", special=QWEN3_IDS,
        config_class="Qwen3Config", model_class="Qwen3Model",
        config=dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                    rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, bos_token_id=None,
                    eos_token_id=5, pad_token_id=5, attention_dropout=0.0, hidden_act="silu"),
        pooling="lasttoken", dense=[], normalize=True, padding_side="left", max_seq_length=256,
        prompts={"query": QWEN3_QUERY_PROMPT, "document": ""}, prompt_lengths={"query": 14},
        inputs=[dict(seg=[8], prompt="query"), dict(seg=[30]), dict(seg=[70]), dict(seg=[3], prompt="query")],
        covers="Qwen3-Embedding: causal Qwen3 (GQA 4/2, q/k norm, head_dim 16), <|endoftext|> appended, last-token "
               "pooling + Normalize, the query instruction prompt on inputs 0 and 3, left padding in the batch"),
    "embed_gemma": dict(
        seed=4606, kind="embedding", join="gemma", special=GEMMA_IDS,
        config_class="Gemma3TextConfig", model_class="Gemma3TextModel",
        config=dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                    num_attention_heads=2, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
                    hidden_activation="gelu_pytorch_tanh", max_position_embeddings=256, rms_norm_eps=1e-6,
                    sliding_window=16, layer_types=["sliding_attention", "full_attention"],
                    use_bidirectional_attention=True,
                    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                     "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
                    pad_token_id=0, eos_token_id=1, bos_token_id=2, tie_word_embeddings=True,
                    final_logit_softcapping=None, attn_logit_softcapping=None, attention_dropout=0.0),
        config_json_override=dict(sliding_window=16),
        pooling="mean", normalize=True, padding_side="right", max_seq_length=256,
        dense=[dict(in_features=HIDDEN, out_features=4 * HIDDEN, bias=False,
                    activation_function="torch.nn.modules.linear.Identity"),
               dict(in_features=4 * HIDDEN, out_features=HIDDEN, bias=False,
                    activation_function="torch.nn.modules.linear.Identity")],
        prompts={"query": "task: search result | query: ", "document": "title: none | text: "},
        prompt_lengths={"query": 8, "document": 6},
        inputs=[dict(seg=[9], prompt="query"), dict(seg=[62], prompt="document"), dict(seg=[2]),
                dict(seg=[25], prompt="document")],
        covers="EmbeddingGemma: bidirectional Gemma 3 (sliding layer window 16 in config.json, full layer), "
               "(1 + w) RMSNorms, q/k norm, embeddings scaled by sqrt(hidden), MQA; <bos> ... <eos>; mean pooling, "
               "two Dense layers without bias (identity activation), Normalize; query/document prompts"),
    "rerank_xlmr": dict(
        seed=4607, kind="rerank_classifier", join="xlmr_pair", special=XLMR_IDS,
        config_class="XLMRobertaConfig", model_class="XLMRobertaForSequenceClassification",
        config=dict(BERT_SHAPE, max_position_embeddings=130, type_vocab_size=1, hidden_act="gelu",
                    layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, num_labels=1,
                    classifier_dropout=0.0),
        padding_side="right", max_seq_length=128,
        inputs=[dict(seg=[5, 9]), dict(seg=[3, 30]), dict(seg=[8, 2]), dict(seg=[6, 60])],
        covers="bge-reranker style cross-encoder: XLM-R encoder, classifier dense + tanh + out_proj on <s>, one "
               "label, CrossEncoder activation Sigmoid; pairs joined <s> q </s></s> d </s>"),
    "rerank_qwen3": dict(
        seed=4608, kind="rerank_causal_yes_no", join="qwen3_rerank", special=QWEN3_IDS,
        config_class="Qwen3Config", model_class="Qwen3ForCausalLM",
        config=dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                    rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, bos_token_id=None,
                    eos_token_id=5, pad_token_id=5, attention_dropout=0.0, hidden_act="silu"),
        padding_side="left", max_seq_length=256,
        inputs=[dict(seg=[4, 7]), dict(seg=[6, 25]), dict(seg=[3, 2]), dict(seg=[5, 12])],
        covers="Qwen3-Reranker: causal Qwen3 with an untied LM head; score = softmax over the logits of 'no' and "
               "'yes' after the last prompt token = sigmoid(yes - no); system/user/assistant prompt format with an "
               "empty think block; left padding in the batch"),
}


# ----------------------------------------------------------------------------------------------
# Inputs (pure Python: --dry-run prints exactly what the real run uses)

class Ids:
    """Content ids drawn from one seeded generator, never equal to a special id of the family."""

    def __init__(self, seed, special):
        self.rng = random.Random(seed)
        self.special = set(v for v in special.values() if v is not None)

    def take(self, n):
        out = []
        while len(out) < n:
            t = self.rng.randrange(CONTENT_LO, VOCAB)
            if t not in self.special:
                out.append(t)
        return out


def build_inputs(name, spec):
    """Returns a dict of inputs, token_type_ids (or None), prompt_names, prompt_ids and, for the
    rerankers, pairs and the prompt-format ids."""
    sp = spec["special"]
    ids = Ids(spec["seed"], sp)
    prompt_ids = {k: ids.take(n) for k, n in sorted(spec.get("prompt_lengths", {}).items())}
    out = {"inputs": [], "token_type_ids": [], "prompt_names": [], "prompt_ids": prompt_ids}
    join = spec["join"]
    extra = {}
    if join == "qwen3_rerank":
        nl = sp["newline"]
        # <|im_start|>system\n{judge instruction}<|im_end|>\n<|im_start|>user\n
        prefix = ([sp["im_start"]] + ids.take(1) + [nl] + ids.take(24) + [sp["im_end"], nl, sp["im_start"]]
                  + ids.take(1) + [nl])
        # <|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n
        suffix = [sp["im_end"], nl, sp["im_start"]] + ids.take(1) + [nl, sp["think"], nl, nl, sp["end_think"], nl, nl]
        instruct_tag, query_tag, doc_tag = ids.take(3), ids.take(3), ids.take(3)
        instruction = ids.take(9)
        extra = dict(prefix_ids=prefix, suffix_ids=suffix, instruct_tag_ids=instruct_tag, query_tag_ids=query_tag,
                     document_tag_ids=doc_tag, instruction_ids=instruction, yes_id=sp["yes"], no_id=sp["no"])
    pairs = []
    for item in spec["inputs"]:
        segs = [ids.take(n) for n in item["seg"]]
        prompt = item.get("prompt")
        p = prompt_ids.get(prompt, []) if prompt else []
        types = None
        if join == "bert":
            seq = [sp["cls"]] + p + segs[0] + [sp["sep"]]
            types = [0] * len(seq)
            if len(segs) > 1:
                seq += segs[1] + [sp["sep"]]
                types += [1] * (len(segs[1]) + 1)
        elif join == "xlmr":
            seq = [sp["bos"]] + p + segs[0] + [sp["eos"]]
        elif join == "modernbert":
            seq = [sp["cls"]] + p + segs[0] + [sp["sep"]]
        elif join == "qwen3_embed":
            seq = p + segs[0] + [sp["eos"]]
        elif join == "gemma":
            seq = [sp["bos"]] + p + segs[0] + [sp["eos"]]
        elif join == "xlmr_pair":
            q, d = segs
            pairs.append({"query_ids": q, "document_ids": d})
            seq = [sp["bos"]] + q + [sp["eos"], sp["eos"]] + d + [sp["eos"]]
        elif join == "qwen3_rerank":
            q, d = segs
            pairs.append({"query_ids": q, "document_ids": d})
            nl = sp["newline"]
            body = (extra["instruct_tag_ids"] + extra["instruction_ids"] + [nl] + extra["query_tag_ids"] + q + [nl]
                    + extra["document_tag_ids"] + d)
            seq = extra["prefix_ids"] + body + extra["suffix_ids"]
        else:
            raise ValueError(f"{name}: unknown join {join!r}")
        out["inputs"].append(seq)
        out["token_type_ids"].append(types)
        out["prompt_names"].append(prompt)
    if all(t is None for t in out["token_type_ids"]) or spec["config"].get("type_vocab_size", 2) < 2:
        out["token_type_ids"] = None
    lengths = [len(s) for s in out["inputs"]]
    if len(set(lengths)) != len(lengths) or max(lengths) <= 64 or not 3 <= len(lengths) <= 5:
        raise ValueError(f"{name}: input lengths {lengths} must differ, number 3-5 and one must exceed 64")
    if max(lengths) > spec["max_seq_length"]:
        raise ValueError(f"{name}: input of {max(lengths)} tokens exceeds max_seq_length {spec['max_seq_length']}")
    if pairs:
        out["pairs"] = pairs
    out.update(extra)
    return out


def modules_json(spec):
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    for d in spec["dense"]:
        i = len(mods)
        mods.append({"idx": i, "name": str(i), "path": f"{i}_Dense", "type": "sentence_transformers.models.Dense"})
    if spec["normalize"]:
        i = len(mods)
        mods.append({"idx": i, "name": str(i), "path": f"{i}_Normalize",
                     "type": "sentence_transformers.models.Normalize"})
    return mods


def dry_run(names):
    try:
        import transformers
        have = lambda cls: hasattr(transformers, cls)  # noqa: E731
        tv = transformers.__version__
    except ImportError:
        have = None
        tv = None
    for name in names:
        spec = FAMILIES[name]
        plan = build_inputs(name, spec)
        line = lambda v: json.dumps(v, default=str)  # noqa: E731
        print(f"== {name}: {spec['kind']}, seed {spec['seed']}, {spec['config_class']} -> {spec['model_class']}")
        if spec.get("needs_class"):
            print("  available:", "unknown here (skipped at run time when transformers has no "
                  f"{spec['needs_class']})" if have is None else have(spec["needs_class"]))
        print("  config:", line(spec["config"]))
        if spec.get("optional_config"):
            print("  where the config class has them:", line(spec["optional_config"]))
        if spec.get("config_json_override"):
            print("  config.json keeps:", line(spec["config_json_override"]))
        if spec["kind"] == "embedding":
            print("  modules.json:", line(modules_json(spec)))
            print("  pooling:", spec["pooling"], "dense:", line(spec["dense"]), "normalize:", spec["normalize"])
            print("  prompts:", line(spec["prompts"]), "prompt ids:", line(plan["prompt_ids"]))
        print("  padding:", spec["padding_side"], "special ids:", line(spec["special"]))
        for i, seq in enumerate(plan["inputs"]):
            extra = ""
            if plan["token_type_ids"] is not None:
                extra += f" types {line(plan['token_type_ids'][i])}"
            if plan["prompt_names"][i]:
                extra += f" prompt {plan['prompt_names'][i]}"
            print(f"  input {i} ({len(seq)} tokens): {line(seq)}{extra}")
        for k in ("yes_id", "no_id", "prefix_ids", "suffix_ids", "instruct_tag_ids", "query_tag_ids",
                  "document_tag_ids", "instruction_ids"):
            if k in plan:
                print(f"  {k}: {line(plan[k])}")
        print("  covers:", spec["covers"])
    print(f"transformers here: {tv or 'not installed'}; the real run needs torch, transformers >= 5.17, "
          "sentence-transformers")


# ----------------------------------------------------------------------------------------------
# The real run (torch, transformers, sentence-transformers imported lazily)

def versions():
    import sentence_transformers
    import torch
    import transformers
    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__}


def make_config(spec):
    import transformers
    cls = getattr(transformers, spec["config_class"])
    kw = dict(spec["config"])
    known = cls().to_dict()
    for k, v in spec.get("optional_config", {}).items():
        if k in known:
            kw[k] = v
    cfg = cls(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def randomize(model, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.08)
            elif "norm" in name.lower():
                p.add_(torch.randn(p.shape, generator=g) * 0.2)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    if getattr(model.config, "tie_word_embeddings", False) and hasattr(model, "tie_weights"):
        model.tie_weights()


def batch(seqs, types, pad_id, side):
    """Pads seqs into input_ids / attention_mask (/ token_type_ids) tensors on the given side."""
    import torch
    n = max(len(s) for s in seqs)
    ids, mask, tt = [], [], []
    for i, s in enumerate(seqs):
        padn = n - len(s)
        pad, one = [pad_id] * padn, [0] * padn
        ids.append(pad + s if side == "left" else s + pad)
        mask.append(one + [1] * len(s) if side == "left" else [1] * len(s) + one)
        if types is not None:
            tt.append(one + types[i] if side == "left" else types[i] + one)
    out = {"input_ids": torch.tensor(ids, dtype=torch.long), "attention_mask": torch.tensor(mask, dtype=torch.long)}
    if types is not None:
        out["token_type_ids"] = torch.tensor(tt, dtype=torch.long)
    return out


def backbone_hidden(model, feats):
    """last_hidden_state of the backbone (the model itself, or the encoder/decoder under a head)."""
    import torch
    with torch.no_grad():
        return model.base_model(**feats, return_dict=True).last_hidden_state


def attention_reach(model, feats):
    """Per layer, the largest key distance behind / ahead of a query that gets a nonzero attention
    probability (feats: one unpadded input)."""
    import torch
    try:
        with torch.no_grad():
            out = model.base_model(**feats, output_attentions=True, return_dict=True)
        reach = []
        for a in out.attentions:  # [1, heads, T, T]
            q, k = torch.nonzero((a[0] > 0).any(0), as_tuple=True)
            reach.append({"back": int((q - k).max()), "forward": int((k - q).max())})
        return reach
    except Exception as e:  # recorded, not fatal
        return f"error: {type(e).__name__}: {e}"


def st_modules(spec, hidden_size, seed):
    """The sentence-transformers modules after the backbone: Pooling, Dense..., Normalize."""
    import torch
    from sentence_transformers.models import Dense, Normalize, Pooling
    from sentence_transformers.util import import_from_string
    mods = [Pooling(hidden_size, pooling_mode=spec["pooling"])]
    g = torch.Generator().manual_seed(seed + 1000)
    for d in spec["dense"]:
        act = import_from_string(d["activation_function"])()
        m = Dense(d["in_features"], d["out_features"], bias=d["bias"], activation_function=act)
        with torch.no_grad():
            m.linear.weight.copy_(torch.randn(m.linear.weight.shape, generator=g) * 0.08)
            if m.linear.bias is not None:
                m.linear.bias.copy_(torch.randn(m.linear.bias.shape, generator=g) * 0.1)
        mods.append(m)
    if spec["normalize"]:
        mods.append(Normalize())
    for m in mods:
        m.eval()
    return mods


def st_pipeline(model, mods, feats):
    """SentenceTransformer.forward on id tensors: the backbone's token embeddings through the modules.
    Returns (pooled, sentence_embedding)."""
    import torch
    f = dict(feats)
    f["token_embeddings"] = backbone_hidden(model, feats)
    with torch.no_grad():
        f = mods[0](f)
        pooled = f["sentence_embedding"].clone()
        for m in mods[1:]:
            f = m(f)
    return pooled, f["sentence_embedding"]


def rerank_scores(spec, model, feats, plan):
    """(raw, scores): the classifier logit and its sigmoid, or yes - no and P(yes) at the last position."""
    import torch
    with torch.no_grad():
        logits = model(**feats, return_dict=True).logits
    if spec["kind"] == "rerank_classifier":
        raw = logits[:, 0]
        return raw, torch.sigmoid(raw)
    if spec["padding_side"] != "left":
        raise ValueError("the yes/no reranker reads the last column: it needs left padding")
    last = logits[:, -1, :]
    pair = torch.stack([last[:, plan["no_id"]], last[:, plan["yes_id"]]], dim=1)
    scores = torch.nn.functional.log_softmax(pair, dim=1)[:, 1].exp()
    return pair[:, 1] - pair[:, 0], scores


def write_st_folder(hf, spec, mods, vers):
    from sentence_transformers.models import Dense, Pooling
    with open(os.path.join(hf, "modules.json"), "w") as f:
        json.dump(modules_json(spec), f, indent=2)
    with open(os.path.join(hf, "config_sentence_transformers.json"), "w") as f:
        json.dump({"model_type": "SentenceTransformer",
                   "__version__": {"sentence_transformers": vers["sentence_transformers"],
                                   "transformers": vers["transformers"], "pytorch": vers["torch"]},
                   "prompts": spec["prompts"], "default_prompt_name": None, "similarity_fn_name": "cosine"},
                  f, indent=2)
    with open(os.path.join(hf, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": spec["max_seq_length"], "do_lower_case": False}, f, indent=2)
    for entry, m in zip(modules_json(spec)[1:], mods):
        path = os.path.join(hf, entry["path"])
        os.makedirs(path, exist_ok=True)
        if isinstance(m, (Pooling, Dense)):
            m.save(path)


def word_tokenizer(dst, spec, pair_template=None):
    """A throwaway tokenizer whose words "t<id>" map to <id>, so that the sentence-transformers
    entry points can be fed exact ids through text (only for the st_roundtrip check)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    vocab = {f"t{i}": i for i in range(VOCAB)}
    sp = spec["special"]
    tok = Tokenizer(models.WordLevel(vocab, unk_token=f"t{sp.get('unk', 3)}"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if pair_template:
        bos, eos = sp["bos"], sp["eos"]
        tok.post_processor = processors.TemplateProcessing(
            single=f"t{bos} $A t{eos}", pair=f"t{bos} $A t{eos} t{eos} $B t{eos}",
            special_tokens=[(f"t{bos}", bos), (f"t{eos}", eos)])
    names = ["input_ids", "attention_mask"]
    if spec["join"] == "bert":
        names.insert(1, "token_type_ids")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=f"t{sp['pad']}", model_input_names=names,
                                   padding_side=spec["padding_side"], model_max_length=spec["max_seq_length"])
    fast.save_pretrained(dst)


def st_roundtrip(name, spec, hf, plan, ref):
    """Loads the written folder through sentence-transformers itself and compares: the check that
    modules.json, the module configs and the CrossEncoder activation say what the references used."""
    import numpy as np
    tmp = tempfile.mkdtemp(prefix=f"{name}_st_")
    try:
        shutil.copytree(hf, tmp, dirs_exist_ok=True)
        words = lambda s: " ".join(f"t{i}" for i in s)  # noqa: E731
        kw = dict(device="cpu", local_files_only=True, model_kwargs={"attn_implementation": "eager"})
        if spec["kind"] == "embedding":
            from sentence_transformers import SentenceTransformer
            word_tokenizer(tmp, spec)
            st = SentenceTransformer(tmp, **kw)
            types = plan["token_type_ids"]
            keep = [i for i in range(len(plan["inputs"])) if types is None or not any(types[i])]
            got = st.encode([words(plan["inputs"][i]) for i in keep], batch_size=len(keep), convert_to_numpy=True)
            want = np.array([ref["embeddings"][i] for i in keep], dtype=np.float32)
            return {"compared_inputs": keep, "max_abs_diff": float(np.abs(got - want).max())}
        if spec["kind"] == "rerank_classifier":
            from sentence_transformers import CrossEncoder
            word_tokenizer(tmp, spec, pair_template=True)
            ce = CrossEncoder(tmp, **kw)
            got = ce.predict([(words(p["query_ids"]), words(p["document_ids"])) for p in plan["pairs"]],
                             batch_size=len(plan["pairs"]), convert_to_numpy=True)
            return {"activation": type(ce.activation_fn).__name__,
                    "max_abs_diff": float(np.abs(np.asarray(got, dtype=np.float32) - np.array(ref["scores"])).max())}
        return None
    except Exception as e:  # recorded, not fatal: the references above do not depend on it
        print(f"  {name}: st_roundtrip failed: {type(e).__name__}: {e}")
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def folder_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def runtime_config(cfg):
    out = {}
    for k in ("layer_types", "sliding_window", "local_attention", "rope_parameters", "use_bidirectional_attention",
              "query_pre_attn_scalar", "head_dim", "global_attn_every_n_layers"):
        if hasattr(cfg, k):
            v = getattr(cfg, k)
            out[k] = v if isinstance(v, (int, float, str, bool, list, dict, type(None))) else str(v)
    return out


def build(name, spec, out_root, vers):
    import torch
    import transformers
    if spec.get("needs_class") and not hasattr(transformers, spec["needs_class"]):
        print(f"{name}: skipped, transformers {transformers.__version__} has no {spec['needs_class']}")
        return False
    seed = spec["seed"]
    torch.manual_seed(seed)
    plan = build_inputs(name, spec)
    cfg = make_config(spec)
    model_cls = getattr(transformers, spec["model_class"])
    model = model_cls(cfg).to(torch.float32).eval()
    randomize(model, seed)
    sp = spec["special"]
    seqs, types = plan["inputs"], plan["token_type_ids"]
    alone = [batch([s], None if types is None else [types[i]], sp["pad"], spec["padding_side"])
             for i, s in enumerate(seqs)]
    feats = batch(seqs, types, sp["pad"], spec["padding_side"])
    hidden0 = backbone_hidden(model, alone[0])[0]

    dst = os.path.join(out_root, name)
    hf = os.path.join(dst, "hf")
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(hf)
    if spec["kind"] == "rerank_classifier":
        model.config.sentence_transformers = {"activation_fn": "torch.nn.modules.activation.Sigmoid",
                                              "version": vers["sentence_transformers"]}
    model.save_pretrained(hf, safe_serialization=True)
    gen_cfg = os.path.join(hf, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    if spec.get("config_json_override"):
        # Gemma 3 turns a bidirectional config's sliding_window W into W // 2 + 1 when it reads it, and
        # writes the converted value back: keep the value published checkpoints carry.
        cpath = os.path.join(hf, "config.json")
        with open(cpath) as f:
            saved = json.load(f)
        saved.update(spec["config_json_override"])
        with open(cpath, "w") as f:
            json.dump(saved, f, indent=2)

    ref = {
        "name": name,
        "kind": spec["kind"],
        "generator": f"{SCRIPT}; transformers {vers['transformers']}, torch {vers['torch']}, sentence-transformers "
                     f"{vers['sentence_transformers']}, float32, eager attention, CPU",
        "versions": vers,
        "seed": seed,
        "date": datetime.date.today().isoformat(),
        "weights": WEIGHTS,
        "covers": spec["covers"],
        "config_class": spec["config_class"],
        "model_class": spec["model_class"],
        "special_ids": sp,
        "inputs": seqs,
    }
    if types is not None:
        ref["token_type_ids"] = types
    ref["padding_side"] = spec["padding_side"]
    ref["max_seq_length"] = spec["max_seq_length"]
    ref["last_hidden_state_shape"] = list(hidden0.shape)
    ref["last_hidden_state"] = hidden0.reshape(-1).tolist()
    checks = {}
    if spec["kind"] == "embedding":
        mods = st_modules(spec, cfg.hidden_size, seed)
        pooled, emb = st_pipeline(model, mods, feats)
        alone_emb = torch.cat([st_pipeline(model, mods, a)[1] for a in alone])
        checks["alone_vs_batched_max_abs_diff"] = float((alone_emb - emb).abs().max())
        write_st_folder(hf, spec, mods, vers)
        ref.update({
            "prompt_names": plan["prompt_names"],
            "prompt_ids": plan["prompt_ids"],
            "prompts": spec["prompts"],
            "pooling": spec["pooling"],
            "dense": spec["dense"],
            "normalize": spec["normalize"],
            "modules": modules_json(spec),
            "pooled": pooled.tolist(),
            "embedding_dim": int(emb.shape[1]),
            "embeddings": emb.tolist(),
        })
    else:
        raw, scores = rerank_scores(spec, model, feats, plan)
        alone_scores = torch.cat([rerank_scores(spec, model, a, plan)[1] for a in alone])
        checks["alone_vs_batched_max_abs_diff"] = float((alone_scores - scores).abs().max())
        ref["pairs"] = plan["pairs"]
        if spec["kind"] == "rerank_classifier":
            ref["activation"] = "sigmoid"
            ref["logits"] = raw.tolist()
        else:
            ref["activation"] = "softmax over [no, yes] logits at the last position, P(yes)"
            ref["yes_minus_no"] = raw.tolist()
            for k in ("yes_id", "no_id", "prefix_ids", "suffix_ids", "instruct_tag_ids", "query_tag_ids",
                      "document_tag_ids", "instruction_ids"):
                ref[k] = plan[k]
            ref["prompt_template"] = {"prefix": QWEN3_RERANK_PREFIX, "body": QWEN3_RERANK_BODY,
                                      "suffix": QWEN3_RERANK_SUFFIX,
                                      "ids": "prefix_ids + instruct_tag_ids + instruction_ids + [newline] + "
                                             "query_tag_ids + query_ids + [newline] + document_tag_ids + "
                                             "document_ids + suffix_ids"}
            with torch.no_grad():
                ref["last_logits"] = model(**alone[0], return_dict=True).logits[0, -1].tolist()
        ref["scores"] = scores.tolist()
    ref["runtime_config"] = runtime_config(model.config)
    longest = max(range(len(seqs)), key=lambda i: len(seqs[i]))
    ref["attention_reach"] = attention_reach(model, alone[longest])
    ref["measured_on_input"] = longest

    # The saved folder reloads to the same outputs.
    reloaded = model_cls.from_pretrained(hf, local_files_only=True, attn_implementation="eager",
                                         dtype=torch.float32).eval()
    diff = float((backbone_hidden(reloaded, alone[0])[0] - hidden0).abs().max())
    checks["reload_max_abs_diff"] = diff
    shape_keys = ("layer_types", "sliding_window", "local_attention", "use_bidirectional_attention")
    again = runtime_config(reloaded.config)
    if diff > 1e-6 or any(again.get(k) != ref["runtime_config"].get(k) for k in shape_keys):
        raise RuntimeError(f"{name}: the saved folder does not reload to the same model (max abs diff {diff}, "
                         f"runtime config {again} vs {ref['runtime_config']})")
    rt = st_roundtrip(name, spec, hf, plan, ref)
    if rt is not None:
        checks["st_roundtrip"] = rt
    ref["checks"] = checks
    with open(os.path.join(dst, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    size = folder_bytes(dst)
    if size > MAX_BYTES:
        raise RuntimeError(f"{name}: {size} bytes, over the {MAX_BYTES} byte limit")
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, {size} bytes, input lengths "
          f"{[len(s) for s in seqs]}, checks {checks}")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                                  "fixtures", "models"))
    ap.add_argument("--only", nargs="*", choices=sorted(FAMILIES), help="families to write (default: all)")
    ap.add_argument("--dry-run", action="store_true", help="print the configs and inputs; needs no torch")
    args = ap.parse_args()
    names = args.only or list(FAMILIES)
    if args.dry_run:
        dry_run(names)
        return
    import torch
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    vers = versions()
    if not vers["transformers"].startswith("5."):
        print(f"warning: written for transformers 5.17; this is {vers['transformers']}", file=sys.stderr)
    out = os.path.abspath(args.out)
    written, skipped, failed = [], [], []
    for name in names:
        try:
            (written if build(name, FAMILIES[name], out, vers) else skipped).append(name)
        except Exception as e:  # one family's failure leaves the others to be written
            print(f"{name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(name)
    print(f"written: {written}; skipped: {skipped}; failed: {failed}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
