#!/usr/bin/env python3
"""transformers' token ids for every principal-condition CREG prompt through each panel
model's real tokenizer and chat template: the reference runner/cli/tests/real/tokenizers.rs
holds the runner's tokenization to, and the prompt lengths docs/real-models.md tabulates.

    bash scripts/real-models
    cargo build -p runner
    python3 scripts/real_tokenizers.py --runner target/debug/runner   # in the served tests' venv

The tokenizers are the real ones scripts/real-models brings (Llama 3.1 and Gemma 3 from
their npm packages; Qwen2.5's is the one transformers 5 rebuilt from the metadata of the
real Qwen2.5-Coder-0.5B-Instruct GGUF file, which tests/real/qwen2_gguf.rs holds equal to
the runner's own GGUF tokenizer); each path is relative to the real-models folder. The templates are the panel's, as embedded in the
engine (runner/engine/src/candle/chat_template/templates/, checked against models.toml's
renderings by a test). For each (task, condition) file of `runner render` it records the
number of prompts, each prompt's length in tokens, and a SHA-256 over every prompt's ids
(its count, then its ids, as little-endian u32). Writes runner/cli/tests/data/real/tokenizers.json.
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
# Panel models (models.toml) by the tokenizer and template they share.
PANEL = {
    "qwen2.5": {"models": ["qwen2.5-1.5b", "qwen2.5-7b"], "tokenizer": "qwen2.5-coder-0.5b", "template": "qwen2_5.jinja"},
    "llama-3.1": {"models": ["llama-3.1-8b"], "tokenizer": "tokenizers/llama3_1", "template": "llama3_1.jinja"},
    "gemma-3": {"models": ["gemma-3-12b"], "tokenizer": "tokenizers/gemma3", "template": "gemma3.jinja"},
}
TASKS = ("belief", "contradiction", "action", "explanation")
CONDITIONS = ("full_graph", "graph_without_relations", "canonical_json", "structured_list")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default=str(ROOT / "target/debug/runner"))
    ap.add_argument("--models", default=str(ROOT / "target/real-models"))
    args = ap.parse_args()
    out = pathlib.Path(tempfile.mkdtemp())
    subprocess.run([args.runner, "render", "--out", str(out)], check=True, capture_output=True)
    result = {"panel": PANEL, "files": {}}
    for name, p in PANEL.items():
        tok = AutoTokenizer.from_pretrained(pathlib.Path(args.models) / p["tokenizer"])
        template = (TEMPLATES / p["template"]).read_text()
        files = {}
        for task in TASKS:
            for cond in CONDITIONS:
                rows = [json.loads(l) for l in open(out / task / f"{cond}.jsonl")]
                texts = [
                    tok.apply_chat_template([{"role": "user", "content": r["text"]}], chat_template=template,
                                            add_generation_prompt=True, tokenize=False)
                    for r in rows
                ]
                ids = tok(texts, add_special_tokens=False)["input_ids"]
                h = hashlib.sha256()
                for one in ids:
                    h.update(struct.pack(f"<I{len(one)}I", len(one), *one))
                files[f"{task}/{cond}"] = {"count": len(ids), "lengths": [len(i) for i in ids],
                                           "sha256": h.hexdigest()}
                print(f"{name} {task}/{cond}: {len(ids)} prompts, max {max(len(i) for i in ids)} tokens", flush=True)
        result["files"][name] = files
    dest = ROOT / "runner/cli/tests/data/real/tokenizers.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
