#!/usr/bin/env python3
"""transformers' token ids, through the tokenizer it builds from a GGUF file's metadata, for
real CREG prompts and a few awkward strings: the reference runner/cli/tests/real/gguf_tokenizer.rs
holds the runner's GGUF tokenizer (runner_engine::candle::load::gguf_tokenizer) to.

    bash scripts/real-models
    cargo build -p runner
    pip install --target <dir> gguf        # transformers reads GGUF files through it
    PYTHONPATH=<dir> python3 scripts/gguf_tokenizer_ids.py --runner target/debug/runner

in the served tests' venv (transformers 5). For each GGUF file it takes the prompts of the
four principal conditions and four tasks of `runner render`, puts each through the chat
template (the file's own; Gemma 3 270M's file has none, so the panel's Gemma 3 template the
engine embeds), and records per (task, condition) file the number of prompts, each prompt's
length in tokens and a SHA-256 over every prompt's ids (its count, then its ids, as
little-endian u32); the awkward strings' ids are kept whole. It also encodes the same texts
with the model's own tokenizer.json (the safetensors folder) and prints where the two
tokenizers disagree. Writes runner/cli/tests/data/real/gguf_tokenizer.json.
"""

import argparse
import hashlib
import json
import pathlib
import struct
import subprocess
import tempfile

from transformers import AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "runner/engine/src/candle/chat_template/templates"
TASKS = ("belief", "contradiction", "action", "explanation")
CONDITIONS = ("full_graph", "graph_without_relations", "canonical_json", "structured_list")
# GGUF file -> the safetensors folder of the same model, and the template when the file has none.
MODELS = {
    "SmolLM2-135M-Instruct.Q4_1.gguf": {"folder": "smollm2-135m-instruct", "template": None},
    "gemma-3-270m-q4_k_m.gguf": {"folder": "gemma-3-270m", "template": "gemma3.jinja"},
}
# Encoded as raw text (no template, no special tokens added).
AWKWARD = [
    "0 1 12 123 1234 12345 3.14159 -42 1,000,000 2026-12-05 0x1F",
    "café naïve Übermaß straße ŝ Ω ≠ ≤ → ∀x∃y 日本語のテキスト 한국어 العربية עברית",
    "emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✨",
    "two  spaces,   three,    four,\ttab\t\ttabs, trailing   ",
    "   leading spaces",
    "lines\nnew\n\nblank\n\n\nthree\r\nCRLF\n",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "<|endoftext|><eos><pad> <unk> not<|im_end|>glued",
    "don't won't I'm we'll they've she'd it's DON'T",
    "{\"key\": [1, 2, {\"a\": null}], \"b\": true}",
    "a\u00a0b\u200bc\ufeffd \u0301e",
    "",
    " ",
    "\n",
    "▁already▁metaspace ▁",
    "<0x41> <unused0> [multimodal]",
]


def sha(ids):
    h = hashlib.sha256()
    for one in ids:
        h.update(struct.pack(f"<I{len(one)}I", len(one), *one))
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default=str(ROOT / "target/debug/runner"))
    ap.add_argument("--models", default=str(ROOT / "target/real-models"))
    args = ap.parse_args()
    models = pathlib.Path(args.models)
    out = pathlib.Path(tempfile.mkdtemp())
    subprocess.run([args.runner, "render", "--out", str(out)], check=True, capture_output=True)
    result = {"tasks": TASKS, "conditions": CONDITIONS, "awkward": AWKWARD, "models": {}}
    for gguf, m in MODELS.items():
        tok = AutoTokenizer.from_pretrained(models / "gguf", gguf_file=gguf)
        own = AutoTokenizer.from_pretrained(models / m["folder"])
        template = (TEMPLATES / m["template"]).read_text() if m["template"] else tok.chat_template
        files = {}
        long_prompts = total_tokens = differ = 0
        for task in TASKS:
            for cond in CONDITIONS:
                rows = [json.loads(l) for l in open(out / task / f"{cond}.jsonl")]
                texts = [
                    tok.apply_chat_template([{"role": "user", "content": r["text"]}], chat_template=template,
                                            add_generation_prompt=True, tokenize=False)
                    for r in rows
                ]
                ids = tok(texts, add_special_tokens=False)["input_ids"]
                theirs = own(texts, add_special_tokens=False)["input_ids"]
                for i, (a, b) in enumerate(zip(ids, theirs)):
                    if a != b:
                        differ += 1
                        if differ <= 3:
                            at = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                            print(f"  {gguf} {task}/{cond} #{i}: tokenizer.json differs at token {at}: "
                                  f"{tok.convert_ids_to_tokens(a[at:at + 4])} vs {own.convert_ids_to_tokens(b[at:at + 4])}")
                files[f"{task}/{cond}"] = {"count": len(ids), "lengths": [len(i) for i in ids], "sha256": sha(ids)}
                long_prompts += sum(len(i) >= 1000 for i in ids)
                total_tokens += sum(len(i) for i in ids)
        awkward = tok(AWKWARD, add_special_tokens=False)["input_ids"]
        own_awkward = own(AWKWARD, add_special_tokens=False)["input_ids"]
        for text, a, b in zip(AWKWARD, awkward, own_awkward):
            if a != b:
                print(f"  {gguf} awkward {text!r}: gguf {tok.convert_ids_to_tokens(a)} "
                      f"tokenizer.json {own.convert_ids_to_tokens(b)}")
        count = sum(f["count"] for f in files.values())
        print(f"{gguf}: {count} prompts ({long_prompts} of 1,000+ tokens), {total_tokens} tokens; "
              f"tokenizer.json gives other ids on {differ} prompts", flush=True)
        result["models"][gguf] = {
            "template": m["template"],
            "bos": tok.bos_token_id,
            "eos": tok.eos_token_id,
            "add_bos": bool(getattr(tok, "add_bos_token", False)),
            "files": files,
            "awkward_ids": awkward,
        }
    dest = ROOT / "runner/cli/tests/data/real/gguf_tokenizer.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(result, separators=(",", ":"), ensure_ascii=False) + "\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
