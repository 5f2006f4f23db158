#!/usr/bin/env python3
"""`runner bench` and transformers side by side, on one model, one set of prompts.

    cargo build --release
    python3 scripts/bench_compare.py [--arch qwen2] [--rounds 5] [--batch 1,8,32]

A shared machine's speed drifts from minute to minute, so the two are interleaved:
each round runs the engine once (a fresh `runner bench --repeat 1` process) and then
transformers once (the model stays loaded), and the table gives the median over
rounds of each figure, with the engine-over-transformers ratios. Needs torch and
transformers in the Python that runs it; nothing else runs meanwhile.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_transformers as hf  # noqa: E402


def engine_round(runner, model, prompts_file, args):
    cmd = [
        runner,
        "bench",
        "--json",
        "--model",
        model,
        "--batch",
        args.batch,
        "--prompt-tokens",
        str(args.prompt_tokens),
        "--new-tokens",
        str(args.new_tokens),
        "--device",
        "cpu",
        "--repeat",
        "1",
        "--save-prompts",
        prompts_file,
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {r["batch"]: r for r in map(json.loads, out.splitlines())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default="target/release/runner")
    ap.add_argument("--model", help="a model folder; default: a fresh --arch/--size fixture")
    ap.add_argument("--arch", default="qwen2")
    ap.add_argument("--size", default="small")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-compare-")
    model = args.model
    if model is None:
        model = os.path.join(work, f"{args.arch}-{args.size}")
        subprocess.run(
            [args.runner, "fixture", "--arch", args.arch, "--size", args.size, "--out", model],
            check=True,
            capture_output=True,
        )
    prompts_file = os.path.join(work, "prompts.json")
    batches = [int(b) for b in args.batch.split(",")]

    engine, theirs = [], []
    tf_model = None
    for r in range(args.rounds):
        engine.append(engine_round(args.runner, model, prompts_file, args))
        if tf_model is None:
            tf_model = hf.load(model, "sdpa")
            prompts = json.load(open(prompts_file))
            hf.run(tf_model, prompts[:1], 2)  # warm-up, untimed
        theirs.append({b: hf.measure(tf_model, prompts[:b], args.new_tokens) for b in batches})
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    def med(rounds, b, key):
        return hf.median([x[b][key] for x in rounds])

    def ahead(b, key):
        """In how many rounds the engine was the faster of the two."""
        won = sum(e[b][key] > t[b][key] for e, t in zip(engine, theirs))
        return f"{won}/{len(engine)}"

    print(f"model: {model}; {args.prompt_tokens}-token prompts, {args.new_tokens} new tokens; "
          f"medians over {args.rounds} interleaved rounds")
    print(f"engine: {engine[0][batches[0]]['engine']}")
    print(f"transformers: {theirs[0][batches[0]]['engine']}")
    print()
    print("| batch | prefill tok/s engine | transformers | ratio | engine ahead "
          "| decode tok/s engine | transformers | ratio | engine ahead "
          "| peak RSS MiB engine | transformers |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for b in batches:
        ep, tp = med(engine, b, "prefill_tok_per_s"), med(theirs, b, "prefill_tok_per_s")
        ed, td = med(engine, b, "decode_tok_per_s"), med(theirs, b, "decode_tok_per_s")
        # A process's peak only grows, so peaks come from the first round, which ran
        # the batch sizes in order: the figure at batch b is the peak up to b.
        em, tm = engine[0][b]["peak_rss_mib"], theirs[0][b]["peak_rss_mib"]
        print(f"| {b} | {ep:.0f} | {tp:.0f} | {ep / tp:.2f} | {ahead(b, 'prefill_tok_per_s')} "
              f"| {ed:.0f} | {td:.0f} | {ed / td:.2f} | {ahead(b, 'decode_tok_per_s')} "
              f"| {em:.0f} | {tm:.0f} |")
    lo, hi = batches[0], batches[-1]
    print()
    print("Peak RSS: the process's peak up to that batch size, in the first round.")
    for name, rounds in [("engine", engine), ("transformers", theirs)]:
        scale = med(rounds, hi, "decode_tok_per_s") / med(rounds, lo, "decode_tok_per_s")
        print(f"decode scaling, batch {hi} over batch {lo}: {name} {scale:.2f}x")


if __name__ == "__main__":
    main()
