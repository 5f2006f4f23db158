#!/usr/bin/env python3
"""A GGUF file as a Hugging Face folder, the way transformers 5 writes one.

    python3 scripts/real_models_convert.py FILE.gguf OUT_DIR

transformers dequantizes the GGUF's blocks to f32 and rebuilds the tokenizer from the
file's metadata. Its save_pretrained refuses a GGUF-loaded model, so the weights are
written with safetensors (a tied output head is left out, as save_pretrained leaves it)
and config, generation config and tokenizer are saved beside them. The config's
quantization_config (which names the GGUF file) is dropped: the folder holds plain f32
weights, and transformers would otherwise look for the GGUF again when loading it.
Called by scripts/real-models, which needs torch, transformers and the gguf package.
"""

import json
import pathlib
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    gguf, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.config.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    config.pop("quantization_config", None)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    print(f"real-models: {gguf.name} -> {out} ({len(state)} tensors)")


if __name__ == "__main__":
    main()
