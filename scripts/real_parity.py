#!/usr/bin/env python3
"""transformers' greedy decoding of real CREG prompts on the real checkpoints, the
reference runner/cli/tests/it/real_parity.rs holds the engine to.

    bash scripts/real-models
    cargo build -p runner
    python3 scripts/real_parity.py --runner target/debug/runner      # in the served tests' venv

For SmolLM2-135M-Instruct, Gemma 3 270M and Qwen2.5-Coder-0.5B-Instruct (and, where
`scripts/real-models --qwen2.5-1.5b` brought it, Qwen2.5-Coder-1.5B-Instruct) it picks 24 real CREG
prompts (the four principal conditions, all four tasks, every regime; `runner render`)
and builds long contexts from further prompts up to 8,064 tokens (8,192 positions less
the 128 new tokens: SmolLM2's whole window, and 16 times Gemma 3's 512-token sliding
window). For each it records transformers' prompt token ids (the chat template, or for
the base model the plain text after the tokenizer's BOS), then decodes 128 greedy tokens
in f32 (stopping at the model's end-of-turn token, as the engine does) and records at
every position the gap between the two highest logits: where that gap is under 1e-3,
the two implementations' rounding may pick differently, and the test compares only up to
the first such position. Writes runner/cli/tests/data/real/<model>.json.

`--cases ci` decodes only the cases CI compares (the diagonal of tasks and conditions,
six prompts, and the longest long prompt), as transformers on two cores takes most of an
hour for all 26 on the Qwen2.5 models; `--no-long` leaves the long prompts out.
"""

import argparse
import hashlib
import json
import pathlib
import subprocess
import tempfile
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ("smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
TASKS = ("belief", "contradiction", "action", "explanation")
CONDITIONS = ("full_graph", "graph_without_relations", "canonical_json", "structured_list")
PROMPTS = 24
NEW_TOKENS = 128
LONG = (4096, 8064)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def rendered_prompts(runner):
    out = pathlib.Path(tempfile.mkdtemp())
    subprocess.run([runner, "render", "--out", str(out)], check=True, capture_output=True)
    by = {}
    for task in TASKS:
        for cond in CONDITIONS:
            by[(task, cond)] = [json.loads(l) for l in open(out / task / f"{cond}.jsonl")]
    return by


def regime(row):
    return row["scenario"].split("-")[2]


def pick(by):
    """24 prompts: every (task, condition) pair, every regime, varied steps."""
    regimes = sorted({regime(r) for r in by[(TASKS[0], CONDITIONS[0])]})
    cases = []
    for i in range(PROMPTS):
        task, cond = TASKS[i % 4], CONDITIONS[(i // 4) % 4]
        want = regimes[i % len(regimes)]
        rows = [r for r in by[(task, cond)] if regime(r) == want]
        row = rows[(i * 7) % len(rows)]
        cases.append({
            "name": f"{task}/{cond}/{row['scenario']}/step{row['step']}",
            "scenario": row["scenario"], "step": row["step"], "condition": cond, "task": task,
            "user": row["text"],
        })
    return cases


def prompt_ids(tok, plain, user):
    if plain:
        return tok(user, add_special_tokens=True)["input_ids"]
    ids = tok.apply_chat_template([{"role": "user", "content": user}], add_generation_prompt=True,
                                  tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


def long_cases(tok, plain, by, used):
    """User messages of whole prompts' paragraphs, up to each target length."""
    paragraphs = []
    for task in TASKS:
        for row in by[(task, "full_graph")][1::97]:
            paragraphs.extend(p for p in row["text"].split("\n\n") if p.strip())
    cases = []
    for target in LONG:
        text, n = "", 0
        for p in paragraphs:
            candidate = (text + "\n\n" + p) if text else p
            if len(prompt_ids(tok, plain, candidate)) > target:
                break
            text = candidate
        n = len(prompt_ids(tok, plain, text))
        cases.append({"name": f"long/{target}", "scenario": None, "step": None, "condition": None,
                      "task": None, "user": text})
    return cases


def decode(model, ids, eos):
    x = torch.tensor([ids])
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=NEW_TOKENS, do_sample=False,
                         output_logits=True, return_dict_in_generate=True, eos_token_id=eos,
                         pad_token_id=eos[0])
    tokens = out.sequences[0, len(ids):].tolist()
    gaps = []
    for logits in out.logits:
        top = torch.topk(logits[0].float(), 2).values
        gaps.append(round(float(top[0] - top[1]), 6))
    # generate pads after the end-of-turn token; the engine stops there and, like
    # the runner's journal, keeps the tokens before it (the gap at the stop is kept).
    for i, t in enumerate(tokens):
        if t in eos:
            return tokens[:i], gaps[: i + 1], True
    return tokens, gaps, False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default=str(ROOT / "target/debug/runner"))
    ap.add_argument("--models", default=str(ROOT / "target/real-models"))
    ap.add_argument("--only", choices=MODELS)
    ap.add_argument("--fresh", action="store_true", help="decode every case again")
    ap.add_argument("--cases", choices=("all", "ci"), default="all")
    ap.add_argument("--no-long", action="store_true", help="leave the long prompts out")
    args = ap.parse_args()
    torch.set_num_threads(2)
    by = rendered_prompts(args.runner)
    for name in MODELS:
        if args.only and name != args.only:
            continue
        folder = pathlib.Path(args.models) / name
        if not folder.exists():
            print(f"{name}: {folder} is missing, skipped")
            continue
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        model.eval()
        plain = tok.chat_template is None
        eos = model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos]
        cases = pick(by)
        if args.cases == "ci":
            # The diagonal the parity test decodes in CI (task i % 4 under condition i / 4 % 4).
            cases = [c for i, c in enumerate(cases) if i % 4 == i // 4 % 4]
        if not args.no_long:
            longs = long_cases(tok, plain, by, None)
            cases += longs[-1:] if args.cases == "ci" else longs
        dest = ROOT / "runner/cli/tests/data/real" / f"{name}.json"
        weights = sha256(folder / "model.safetensors")
        # Cases already decoded on the same weights and prompt are kept (--fresh redoes all).
        done = {}
        if dest.exists() and not args.fresh:
            old = json.loads(dest.read_text())
            if old["weights_sha256"] == weights:
                done = {c["name"]: c for c in old["cases"]}
        start = time.time()
        for i, c in enumerate(cases):
            kept = done.get(c["name"])
            if kept is not None and kept["user"] == c["user"]:
                cases[i] = kept
                continue
            c["prompt_ids"] = prompt_ids(tok, plain, c["user"])
            with torch.no_grad():
                c["greedy"], c["gaps"], c["stopped"] = decode(model, c["prompt_ids"], eos)
            print(f"{name} {c['name']}: {len(c['prompt_ids'])} prompt tokens, {len(c['greedy'])} new, "
                  f"min gap {min(c['gaps']):.2e} ({time.time() - start:.0f} s)", flush=True)
        out = {
            "model": name,
            "weights_sha256": weights,
            "prompt_format": "plain" if plain else "chat",
            "eos": eos,
            "new_tokens": NEW_TOKENS,
            "transformers": __import__("transformers").__version__,
            "torch": torch.__version__,
            "cases": cases,
        }
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(out, separators=(",", ":")) + "\n")
        print(f"wrote {dest}")


if __name__ == "__main__":
    main()
