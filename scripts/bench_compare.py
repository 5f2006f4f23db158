#!/usr/bin/env python3
"""`runner bench` beside its peers (transformers, llama.cpp), on one model, one set of prompts.

    cargo build --release
    python3 scripts/bench_compare.py [--arch qwen2] [--rounds 5] [--batch 1,8,32]
        [--peers transformers,llama.cpp] [--quantization q8_0] [--json OUT]

A shared machine's speed drifts from minute to minute, so the sides are interleaved:
each round runs the engine once (a fresh `runner bench --repeat 1` process) and then each
peer once (its model stays loaded), and the tables give the median over rounds of each
figure, with the engine-over-peer ratios. Nothing else should run meanwhile: on a
machine with as many cores as threads, another busy process cost the engine under 2x
but llama.cpp's decode 7-100x (its threads meet at a spinning barrier after every graph
node, and a preempted thread stalls the rest for a scheduler slice), so the load average
at each round's start is printed beside the tables.

Each peer lives in a process of its own (loaded once, then asked for one round at a
time), so that its peak RSS is its own and not the other peer's, and so that torch's
and llama.cpp's thread pools never share a process. The engine writes the prompts' token
ids in its first round and every peer runs those ids.

Peers: transformers (scripts/bench_transformers.py; needs torch and transformers) and
llama.cpp (scripts/bench_llamacpp.py; needs llama-cpp-python and gguf). By default every
peer whose packages import runs, and the others are named with the reason. With
--quantization q8_0 the engine quantizes its weights at load and llama.cpp runs the
q8_0 GGUF made by its own quantizer; transformers, whose side runs f32 only, is skipped.
--kv-cache f16 holds the engine's key/value cache in f16, as llama.cpp's here is.
--quantization, --dtype and --kv-cache reach `runner bench` only when given, so the script also runs
against a binary that predates them. With --model FILE.gguf both sides run the file's
own blocks (Q4_1, Q4_K_M, ...): the engine's `runner bench --model FILE.gguf` and
llama.cpp loading the same file; transformers, which only dequantizes GGUF files, is
skipped.
"""

import argparse
import importlib.util
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import traceback

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, SCRIPTS)
from bench_record import median  # noqa: E402

# What each peer needs importable, and the weight formats it can run.
PEERS = {
    "transformers": {"modules": ["torch", "transformers"], "quantizations": [None]},
    "llama.cpp": {"modules": ["llama_cpp", "gguf", "numpy"], "quantizations": [None, "q8_0"]},
}


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
    if args.dtype:
        cmd += ["--dtype", args.dtype]
    if args.quantization:
        cmd += ["--quantization", args.quantization]
    if args.kv_cache:
        cmd += ["--kv-cache", args.kv_cache]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return {r["batch"]: r for r in map(json.loads, done.stdout.splitlines())}


# --- Peers, each in its own process ------------------------------------------------


def _open_transformers(model, args):
    import bench_transformers as hf

    m = hf.load(model, "sdpa")

    def warm(prompts):
        hf.run(m, prompts[:1], 2)

    def one_round(prompts, batches, new_tokens):
        return {b: hf.measure(m, prompts[:b], new_tokens) for b in batches}

    return warm, one_round


def _open_llamacpp(model, args):
    import bench_llamacpp as lcpp

    peer = lcpp.load(model, args["quantization"], args["threads"], args["flash_attn"])

    def warm(prompts):
        lcpp.warm_up(peer, prompts)

    def one_round(prompts, batches, new_tokens):
        return lcpp.one_round(peer, prompts, batches, new_tokens)

    return warm, one_round


OPENERS = {"transformers": _open_transformers, "llama.cpp": _open_llamacpp}


def _peer_worker(name, conn, model, args):
    """Loads the peer, says so, then answers ("round", prompts file, batches, new tokens)
    with {batch: record} until told to stop; an exception goes back as text."""
    try:
        warm, one_round = OPENERS[name](model, args)
        conn.send(("ready", None))
        prompts = None
        while True:
            msg = conn.recv()
            if msg[0] == "stop":
                return
            _, prompts_file, batches, new_tokens = msg
            if prompts is None:
                prompts = json.load(open(prompts_file))
                warm(prompts)  # untimed
            conn.send(("round", one_round(prompts, batches, new_tokens)))
    except Exception:
        conn.send(("error", traceback.format_exc()))


class PeerProcess:
    def __init__(self, name, model, args):
        ctx = multiprocessing.get_context("spawn")
        self.name = name
        self.conn, child = ctx.Pipe()
        opts = {
            "quantization": args.quantization,
            "threads": args.threads,
            "flash_attn": not args.no_flash_attn,
        }
        self.proc = ctx.Process(target=_peer_worker, args=(name, child, model, opts), daemon=True)
        self.proc.start()
        self._expect("ready")

    def _expect(self, kind):
        try:
            got, value = self.conn.recv()
        except EOFError:  # the process died without a word, e.g. a crash in native code
            self.proc.join(timeout=5)
            sys.exit(f"{self.name} peer process ended (exit code {self.proc.exitcode})")
        if got == "error":
            sys.exit(f"{self.name} peer failed:\n{value}")
        assert got == kind, (got, kind)
        return value

    def round(self, prompts_file, batches, new_tokens):
        self.conn.send(("round", prompts_file, batches, new_tokens))
        return self._expect("round")

    def close(self):
        try:
            self.conn.send(("stop",))
        except OSError:  # the worker already ended, after an error
            pass
        self.proc.join(timeout=30)


def is_gguf(model):
    return model is not None and model.endswith(".gguf")


def choose_peers(args):
    """The peers to run, and a line for each one left out."""
    asked = [p.strip() for p in args.peers.split(",") if p.strip()] if args.peers else list(PEERS)
    unknown = [p for p in asked if p not in PEERS]
    if unknown:
        sys.exit(f"unknown peer(s) {unknown}; known: {', '.join(PEERS)}")
    chosen, skipped = [], []
    for name in asked:
        missing = [m for m in PEERS[name]["modules"] if importlib.util.find_spec(m) is None]
        if missing:
            if args.peers:
                sys.exit(f"peer {name} needs {', '.join(missing)}, which do not import here")
            skipped.append(f"{name}: {', '.join(missing)} not installed")
        elif args.quantization not in PEERS[name]["quantizations"]:
            skipped.append(f"{name}: no {args.quantization} weights")
        elif is_gguf(args.model) and name != "llama.cpp":
            skipped.append(f"{name}: runs GGUF files only dequantized")
        else:
            chosen.append(name)
    return chosen, skipped


# --- Report ------------------------------------------------------------------------


def summary(sides, batches):
    """The table's rows: per batch size and side, the medians over rounds, the ratios to
    the engine and in how many rounds the engine was the faster."""
    engine = sides["engine"]
    rows = []
    for b in batches:
        for name, rounds in sides.items():
            row = {"batch": b, "side": name, "rounds": len(rounds)}
            for key in ("prefill_tok_per_s", "decode_tok_per_s"):
                row[key] = median([r[b][key] for r in rounds])
                if name != "engine":
                    row[f"engine_over_peer_{key}"] = median([e[b][key] for e in engine]) / row[key]
                    won = sum(e[b][key] > p[b][key] for e, p in zip(engine, rounds, strict=True))
                    row[f"engine_ahead_{key}"] = won
            # A process's peak only grows, so peaks come from the first round, which ran
            # the batch sizes in order: the figure at batch b is the peak up to b.
            row["peak_rss_mib"] = rounds[0][b].get("peak_rss_mib")
            rows.append(row)
    return rows


def print_tables(rows, sides, batches):
    peers = [n for n in sides if n != "engine"]
    get = {(r["batch"], r["side"]): r for r in rows}
    n = len(sides["engine"])
    for key, title in [
        ("prefill_tok_per_s", "prefill tok/s"),
        ("decode_tok_per_s", "decode tok/s"),
    ]:
        head = f"| batch | {title} engine |"
        rule = "| ---: | ---: |"
        for p in peers:
            head += f" {p} | engine/{p} | engine ahead |"
            rule += " ---: | ---: | ---: |"
        print(head)
        print(rule)
        for b in batches:
            line = f"| {b} | {get[(b, 'engine')][key]:.0f} |"
            for p in peers:
                r = get[(b, p)]
                line += (
                    f" {r[key]:.0f} | {r['engine_over_peer_' + key]:.2f} "
                    f"| {r['engine_ahead_' + key]}/{n} |"
                )
            print(line)
        print()
    print("| batch | peak RSS MiB engine |" + "".join(f" {p} |" for p in peers))
    print("| ---: | ---: |" + " ---: |" * len(peers))
    for b in batches:
        cells = [get[(b, s)]["peak_rss_mib"] for s in sides]
        print(f"| {b} | " + " | ".join("-" if c is None else f"{c:.0f}" for c in cells) + " |")
    print()
    print("Peak RSS, first round: the engine's over that batch size's prefill and decode "
          "(`runner bench` resets the process's mark before each run); a peer's, its "
          "process's peak up to that batch size.")
    lo, hi = batches[0], batches[-1]
    if hi != lo:
        for name in sides:
            scale = get[(hi, name)]["decode_tok_per_s"] / get[(lo, name)]["decode_tok_per_s"]
            print(f"decode scaling, batch {hi} over batch {lo}: {name} {scale:.2f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default="target/release/runner")
    ap.add_argument(
        "--model",
        help="a model folder or a .gguf file (engine and llama.cpp run the file as it is); "
        "default: a fresh --arch/--size fixture",
    )
    ap.add_argument("--arch", default="qwen2")
    ap.add_argument("--size", default="small")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--peers", help="comma-separated: transformers, llama.cpp (default: all that import)"
    )
    ap.add_argument("--quantization", choices=["q8_0"], help="engine and llama.cpp weights")
    ap.add_argument("--dtype", help="passed to `runner bench --dtype`; the peers run f32")
    ap.add_argument(
        "--kv-cache",
        choices=["f16"],
        help="passed to `runner bench --kv-cache`: the engine's cache in f16, as llama.cpp's is",
    )
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    ap.add_argument(
        "--no-flash-attn",
        action="store_true",
        help="llama.cpp without flash attention (its default, auto, turns it on for the CPU)",
    )
    ap.add_argument(
        "--json", metavar="OUT", help="also write every round's records and the table's rows"
    )
    args = ap.parse_args()

    peers, skipped = choose_peers(args)
    for line in skipped:
        print(f"skipping {line}", file=sys.stderr)
    if not peers:
        sys.exit("no peer to compare with")

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

    procs = {name: PeerProcess(name, model, args) for name in peers}
    sides = {"engine": [], **{name: [] for name in peers}}
    loads = []
    try:
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            sides["engine"].append(engine_round(args.runner, model, prompts_file, args))
            for name, proc in procs.items():
                sides[name].append(proc.round(prompts_file, batches, args.new_tokens))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        for proc in procs.values():
            proc.close()

    weights = "the file's own" if is_gguf(model) else args.quantization or "f32"
    print(
        f"model: {model}; {args.prompt_tokens}-token prompts, {args.new_tokens} new tokens; "
        f"{weights} weights; medians over {args.rounds} interleaved rounds"
    )
    print("load average (1 min) at each round's start: " + ", ".join(f"{x:.2f}" for x in loads))
    for name, rounds in sides.items():
        print(f"{name}: {rounds[0][batches[0]]['engine']}")
    for line in skipped:
        print(f"skipped {line}")
    print()
    rows = summary(sides, batches)
    print_tables(rows, sides, batches)

    if args.json:
        records = [
            {"round": i, "side": name, **rec[b]}
            for name, rounds in sides.items()
            for i, rec in enumerate(rounds)
            for b in batches
        ]
        doc = {
            "model": model,
            "prompt_tokens": args.prompt_tokens,
            "new_tokens": args.new_tokens,
            "weights": weights,
            "rounds": args.rounds,
            "load_average_at_round_start": loads,
            "records": records,
            "summary": rows,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
