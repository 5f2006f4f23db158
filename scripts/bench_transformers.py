#!/usr/bin/env python3
"""The transformers side of `runner bench`: same model folder, same prompts, same shapes.

    runner fixture --arch qwen2 --size small --out /some/dir
    runner bench --model /some/dir --save-prompts prompts.json
    python3 scripts/bench_transformers.py --model /some/dir --prompts prompts.json

Prints one JSON line per batch size with the fields `runner bench` prints: prefill is
one forward pass over the batch of prompts (building the KV cache), decode is
new_tokens - 1 greedy steps with that cache, every row running to the end.
"""

import argparse
import json
import time

import torch
import transformers
from transformers import AutoModelForCausalLM
from bench_record import record


# transformers 5 renamed `past_key_values` to `cache` (the old name still works there,
# through a slower deprecation path).
CACHE_ARG = "cache" if int(transformers.__version__.split(".")[0]) >= 5 else "past_key_values"


def cache_of(out):
    return getattr(out, "cache", None) or out.past_key_values


def run(model, prompts, new_tokens):
    ids = torch.tensor(prompts)
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model(ids, use_cache=True)
        prefill_s = time.perf_counter() - t0
        cache = cache_of(out)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        t1 = time.perf_counter()
        for _ in range(new_tokens - 1):
            out = model(nxt, use_cache=True, **{CACHE_ARG: cache})
            cache = cache_of(out)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        decode_s = time.perf_counter() - t1
    return prefill_s, decode_s


def load(model_dir, attn):
    return AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation=attn
    ).eval()


def measure(model, prompts, new_tokens, repeat=1):
    """One batch size: median timings over `repeat` runs, as a `runner bench` record."""
    runs = [run(model, prompts, new_tokens) for _ in range(max(1, repeat))]
    engine = (
        f"transformers {transformers.__version__} torch {torch.__version__} "
        f"({model.config._attn_implementation}, {torch.get_num_threads()} threads)"
    )
    return record(engine, runs, prompts, new_tokens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--attn", default="sdpa", help="transformers attention implementation")
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs per batch size; medians are reported"
    )
    args = ap.parse_args()
    prompts = json.load(open(args.prompts))
    model = load(args.model, args.attn)
    run(model, prompts[:1], 2)  # warm-up, untimed
    for b in (int(x) for x in args.batch.split(",")):
        record = measure(model, prompts[:b], args.new_tokens, args.repeat)
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
