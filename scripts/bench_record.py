"""The record every side of `runner bench`'s comparisons reports for one batch size:
the fields and units of `runner bench --json`, so that scripts/bench_compare.py reads
the engine and its peers alike."""

import resource


def median(xs):
    """The median (the upper one of an even count), as `runner bench` reports it."""
    return sorted(xs)[len(xs) // 2]


def record(engine, runs, prompts, new_tokens):
    """`runs` are (prefill_s, decode_s) pairs of one batch of `prompts`; decode time
    covers new_tokens - 1 steps (the first token comes from the prefill)."""
    prefill_s = median([r[0] for r in runs])
    decode_s = median([r[1] for r in runs])
    b, n = len(prompts), len(prompts[0])
    return {
        "engine": engine,
        "batch": b,
        "prompt_tokens": n,
        "new_tokens": new_tokens,
        "runs": len(runs),
        "prefill_s": prefill_s,
        "decode_s": decode_s,
        "prefill_tok_per_s": b * n / prefill_s,
        "decode_tok_per_s": b * (new_tokens - 1) / decode_s,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
