#!/usr/bin/env python3
"""llama.cpp's own q8_0 against its own f32 on the engine's fixtures, position by position:
the reference for `scripts/format_agreement.py`'s q8_0 figures.

    CMAKE_ARGS="-DGGML_NATIVE=ON" pip install llama-cpp-python gguf
    cargo build --release -p runner
    python3 scripts/llamacpp_agreement.py [--arch qwen2,llama] [--prompts 100] [--new-tokens 128]

For each fixture, the f32 GGUF (scripts/bench_llamacpp.py's conversion) writes the greedy
continuation of each prompt, and the q8_0 GGUF (llama.cpp's own quantizer) is fed that
continuation (teacher forcing, one llama_decode over prompt and continuation with logits
at every position): the table gives how often q8_0's greedy token is f32's, beside the
control, f32 fed its own continuation the same way (a batched prefill need not give the
bits of one-token decode steps, so it may stay under 100%). The prompts
are token ids drawn at random (lengths 60 to 400), since llama.cpp is given ids rather
than the engine's chat-templated text. Both sides keep an f32 KV cache, as the engine
does, so the figure is the weights' (and, in llama.cpp's q8_0 product, the activations')
rounding alone.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_llamacpp as bl  # noqa: E402
from bench_llamacpp import lc  # noqa: E402


def logits_at(peer, ctx, batch, tokens, first):
    """Greedy tokens after positions first-1 .. len(tokens)-2: one sequence, fed whole."""
    lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
    cap = lc.llama_n_batch(ctx)
    n = len(tokens)
    flags = np.zeros(n, np.int8)
    flags[first - 1 : n - 1] = 1
    out = []
    for start in range(0, n, cap):
        end = min(start + cap, n)
        batch.fill(
            np.asarray(tokens[start:end], np.int32),
            np.arange(start, end, dtype=np.int32),
            np.zeros(end - start, np.int32),
            flags[start:end],
        )
        if lc.llama_decode(ctx, batch.c) != 0:
            raise SystemExit("llama_decode failed")
        for i in np.flatnonzero(flags[start:end]):
            row = np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, int(i)), shape=(peer.n_vocab,))
            out.append(int(row.argmax()))
    return out


def greedy(peer, ctx, batch, prompt, new_tokens):
    """llama.cpp's greedy continuation of `prompt`, prefilled in llama_decode calls of at
    most n_batch tokens (CREG prompts run past llama.cpp's default 2,048)."""
    lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
    cap = lc.llama_n_batch(ctx)
    n = len(prompt)
    for start in range(0, n, cap):
        end = min(start + cap, n)
        batch.fill(np.asarray(prompt[start:end], np.int32), np.arange(start, end, dtype=np.int32),
                   np.zeros(end - start, np.int32),
                   (np.arange(start, end) == n - 1).astype(np.int8))
        if lc.llama_decode(ctx, batch.c) != 0:
            raise SystemExit("llama_decode failed")
    got = []
    for step in range(new_tokens):
        row = np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, -1), shape=(peer.n_vocab,))
        got.append(int(row.argmax()))
        if step + 1 == new_tokens:
            break
        batch.fill(np.asarray([got[-1]], np.int32), np.asarray([n + step], np.int32),
                   np.zeros(1, np.int32), np.ones(1, np.int8))
        if lc.llama_decode(ctx, batch.c) != 0:
            raise SystemExit("llama_decode failed")
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default="target/release/runner")
    ap.add_argument("--arch", default="qwen2,llama")
    ap.add_argument("--prompts", type=int, default=100)
    ap.add_argument("--new-tokens", type=int, default=128)
    args = ap.parse_args()
    rng = random.Random(7)
    print("| fixture | llama.cpp q8_0 positions agreeing with llama.cpp f32 | % | control: f32 fed its own | % |")
    print("| --- | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as work:
        for arch in args.arch.split(","):
            model = os.path.join(work, arch)
            subprocess.run([args.runner, "fixture", "--arch", arch, "--size", "small", "--out", model],
                           check=True, capture_output=True)
            f32 = bl.load(model, None, kv_type="f32")
            q8 = bl.load(model, "q8_0", kv_type="f32")
            longest = 400 + args.new_tokens
            c32, b32 = f32.context(1, longest)
            c8, b8 = q8.context(1, longest)
            agree = total = control = 0
            for _ in range(args.prompts):
                prompt = [rng.randrange(f32.n_vocab) for _ in range(rng.randint(60, 400))]
                want = greedy(f32, c32, b32, prompt, args.new_tokens)
                got = logits_at(q8, c8, b8, prompt + want, len(prompt))
                own = logits_at(f32, c32, b32, prompt + want, len(prompt))
                agree += sum(a == b for a, b in zip(got, want))
                control += sum(a == b for a, b in zip(own, want))
                total += len(want)
            print(f"| {arch} | {agree} / {total} | {100 * agree / total:.1f} "
                  f"| {control} / {total} | {100 * control / total:.1f} |", flush=True)


if __name__ == "__main__":
    main()
