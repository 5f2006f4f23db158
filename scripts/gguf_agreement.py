#!/usr/bin/env python3
"""The runner against llama.cpp on the same GGUF file, position by position, on real
CREG prompts: teacher-forced greedy agreement.

    pip install llama-cpp-python gguf      (CMAKE_ARGS="-DGGML_NATIVE=ON")
    cargo build --release -p runner
    python3 scripts/gguf_agreement.py --gguf FILE.gguf [--prompts 24] [--new-tokens 128]

For each prompt (the belief, contradiction, action and explanation prompts of the four
principal conditions, from `runner render`, taken in turn), the runner gives the prompt's
token ids (`runner generate --teacher-forced`, its own GGUF tokenizer and the chat
template it uses for the file); llama.cpp decodes 128 greedy tokens from those ids; the
runner is fed llama.cpp's continuation and says its greedy token at every position. The
table gives how often the two agree: the weights are the same blocks, so what differs is
arithmetic (the runner holds 4- to 6-bit blocks as q8_0 panels and quantizes activations
per row in blocks of 32; llama.cpp multiplies the blocks as stored, with activations
quantized to q8_0, q8_1 or q8_K). Both sides keep an f32 KV cache.

    python3 scripts/gguf_agreement.py --gguf FILE.gguf --transformers REF.json [--prompts 24]

instead measures llama.cpp against transformers, the peers against each other: REF.json
is the real-checkpoint test's reference (runner/cli/tests/data/real/MODEL.json:
transformers' f32 greedy continuations on the folder dequantized from the same file), and
llama.cpp is fed each continuation and says its greedy token at every position, over the
same prompts the test takes (the first N with a task), so that the figure stands beside
the runner's against transformers.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_llamacpp as bl  # noqa: E402
from bench_llamacpp import lc  # noqa: E402
from llamacpp_agreement import greedy, logits_at  # noqa: E402

TASKS = ["belief", "contradiction", "action", "explanation"]
CONDITIONS = ["full_graph", "graph_without_relations", "canonical_json", "structured_list"]


def prompts(runner, work, count):
    out = os.path.join(work, "prompts")
    subprocess.run([runner, "render", "--out", out], check=True, capture_output=True)
    files = [[json.loads(l) for l in open(os.path.join(out, t, f"{c}.jsonl"))]
             for c in CONDITIONS for t in TASKS]
    picked = []
    for i in range(count):
        rows = files[i % len(files)]
        picked.append(rows[(i * 37) % len(rows)])
    return picked


def runner_json(runner, gguf, row, forced, work):
    user = os.path.join(work, "user.txt")
    open(user, "w").write(row["text"])
    cmd = [runner, "generate", "--model", gguf, "--prompt-file", user, "--device", "cpu",
           "--teacher-forced", ",".join(map(str, forced))]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default="target/release/runner")
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--transformers", help="measure llama.cpp against this reference instead")
    args = ap.parse_args()
    peer = bl.Peer(args.gguf, args.threads, True, "f32", "GGUF")
    if args.transformers:
        return against_transformers(peer, args)
    agree = total = 0
    worst = []
    with tempfile.TemporaryDirectory() as work:
        for row in prompts(args.runner, work, args.prompts):
            ids = runner_json(args.runner, args.gguf, row, [0], work)["prompt_ids"]
            ctx, batch = peer.context(1, len(ids) + args.new_tokens)
            want = greedy(peer, ctx, batch, ids, args.new_tokens)
            got = runner_json(args.runner, args.gguf, row, want, work)["greedy_at"]
            same = sum(a == b for a, b in zip(got, want))
            agree += same
            total += len(want)
            worst.append((same / len(want), row["request_id"][:12], len(ids)))
            print(f"  {row['request_id'][:12]} ({len(ids)} prompt tokens): {same}/{len(want)}",
                  file=sys.stderr, flush=True)
    print("| GGUF file | prompts | positions | runner's greedy token = llama.cpp's | % | lowest prompt |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    low = min(worst)
    print(f"| {os.path.basename(args.gguf)} | {args.prompts} | {total} | {agree} | "
          f"{100 * agree / total:.2f} | {100 * low[0]:.1f}% ({low[2]} tokens) |")


def against_transformers(peer, args):
    """llama.cpp teacher-forced along transformers' greedy continuations."""
    ref = json.load(open(args.transformers))
    cases = [c for c in ref["cases"] if c.get("task")][: args.prompts]
    agree = total = 0
    for case in cases:
        ids, forced = case["prompt_ids"], case["greedy"]
        ctx, batch = peer.context(1, len(ids) + len(forced))
        got = logits_at(peer, ctx, batch, ids + forced, len(ids))[: len(forced)]
        same = sum(a == b for a, b in zip(got, forced))
        agree += same
        total += len(forced)
        print(f"  {case['name']}: {same}/{len(forced)}", file=sys.stderr, flush=True)
    print("| GGUF file | prompts | positions | llama.cpp's greedy token = transformers' | % |")
    print("| --- | ---: | ---: | ---: | ---: |")
    print(f"| {os.path.basename(args.gguf)} | {len(cases)} | {total} | {agree} | "
          f"{100 * agree / total:.2f} |")


if __name__ == "__main__":
    main()
