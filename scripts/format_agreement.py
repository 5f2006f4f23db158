#!/usr/bin/env python3
"""How often the weight formats pick the greedy token the f32 weights pick, position by position.

    cargo build --release -p runner
    python3 scripts/format_agreement.py [--prompts 100] [--new-tokens 128] [--transformers]

For each small fixture (qwen2, llama, gemma3, phi3) and each prompt, the f32 weights'
greedy continuation is generated, and then fed back to every format with
`runner generate --teacher-forced`: at each position every format sees the f32
continuation so far, and its greedy choice there is compared with f32's. Teacher forcing
is what makes positions comparable: a free-running continuation parts at the first
near-tie that rounds the other way and then compares unrelated text, and the fixtures'
random weights put near-ties everywhere (their logits are spread for varied sampling,
not peaked as a trained model's). f32 fed its own continuation is the control: it must
agree everywhere. With --transformers (needs torch and transformers) it also compares
the first greedy token of the engine's f32 and bf16 weights with transformers in f32 and
bf16 on the same chat-templated prompts (transformers computes in bf16 throughout; the
engine keeps f32 activations beside bf16 weights).
"""

import argparse
import json
import random
import subprocess
import tempfile

WORDS = (
    "the witness saw a red car near river probability of rain is 0.84 because report says "
    "so evidence belief prior posterior should agent wait sensor robot door open closed "
    "camera late supersedes measures target relation reliable"
).split()


def generate(runner, model, prompt, extra):
    out = subprocess.run(
        [runner, "generate", "--model", model, "--prompt", prompt, "--device", "cpu", *extra],
        capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out)


def greedy(runner, model, prompt, new_tokens):
    return generate(runner, model, prompt, ["--greedy", "--max-new-tokens", str(new_tokens)])["token_ids"]


def forced(runner, model, prompt, ids, extra):
    return generate(runner, model, prompt, ["--teacher-forced", ",".join(map(str, ids)), *extra])["greedy_at"]


FORMATS = {"f32": [], "bf16": ["--dtype", "bf16"], "q8_0": ["--quantization", "q8_0"], "q4k": ["--quantization", "q4k"]}


def first_token(runner, model, prompt, extra):
    out = subprocess.run(
        [runner, "generate", "--model", model, "--prompt", prompt, "--greedy",
         "--max-new-tokens", "1", "--device", "cpu", *extra],
        capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out)["token_ids"][0]


def transformers_first(models, tok, prompt):
    import torch

    ids = tok.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt"
    )
    if not isinstance(ids, torch.Tensor):
        ids = ids["input_ids"]
    with torch.no_grad():
        return {name: int(m(ids).logits[0, -1].float().argmax()) for name, m in models.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default="target/release/runner")
    ap.add_argument("--prompts", type=int, default=100)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--arch", default="qwen2,llama,gemma3,phi3")
    ap.add_argument("--transformers", action="store_true")
    args = ap.parse_args()
    rng = random.Random(7)
    prompts = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60))) for _ in range(args.prompts)
    ]
    print("| fixture | format | positions agreeing with f32 | % | first token | % |")
    print("| --- | --- | ---: | ---: | ---: | ---: |", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.arch.split(","):
            model = f"{tmp}/{arch}"
            subprocess.run([args.runner, "fixture", "--arch", arch, "--size", "small", "--out", model],
                           check=True, capture_output=True)
            continuations = [greedy(args.runner, model, p, args.new_tokens) for p in prompts]
            for name, extra in FORMATS.items():
                same = total = first = 0
                for p, ids in zip(prompts, continuations):
                    if not ids:
                        continue
                    at = forced(args.runner, model, p, ids, extra)
                    same += sum(a == b for a, b in zip(at, ids))
                    total += len(ids)
                    first += at[0] == ids[0]
                n = sum(1 for ids in continuations if ids)
                print(f"| {arch} | {name} | {same}/{total} | {100 * same / total:.1f} | {first}/{n} | {100 * first / n:.0f} |",
                      flush=True)
            if args.transformers:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer

                torch.set_num_threads(2)
                tok = AutoTokenizer.from_pretrained(model)
                models = {
                    "f32": AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval(),
                    "bf16": AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16).eval(),
                }
                agree = {"f32": 0, "bf16": 0}
                for p, ids in zip(prompts, continuations):
                    f32_token = ids[0]
                    want = transformers_first(models, tok, p)
                    agree["f32"] += f32_token == want["f32"]
                    agree["bf16"] += first_token(args.runner, model, p, ["--dtype", "bf16"]) == want["bf16"]
                print(f"{arch}: engine f32 = transformers f32 on {agree['f32']}/{len(prompts)}; "
                      f"engine bf16 weights = transformers bf16 on {agree['bf16']}/{len(prompts)}", flush=True)


if __name__ == "__main__":
    main()
