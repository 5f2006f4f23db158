#!/usr/bin/env python3
"""The llama.cpp side of `runner bench`: same weights, same token ids, same shapes.

    CMAKE_ARGS="-DGGML_NATIVE=ON" pip install llama-cpp-python gguf
    runner fixture --arch qwen2 --size small --out /some/dir
    runner bench --model /some/dir --save-prompts prompts.json
    python3 scripts/bench_llamacpp.py --model /some/dir --prompts prompts.json [--quantization q8_0]

llama-cpp-python builds llama.cpp from source (GGML_NATIVE: for this machine's CPU,
with OpenMP), which is the build a llama.cpp user runs; the install takes minutes.

The model folder is converted here, not by llama.cpp's convert_hf_to_gguf.py, which
needs torch and transformers: the tensors get llama.cpp's names (the `gguf` package's own
name map), the hparams the keys llama.cpp reads, and the vocabulary of tokenizer.json as
a "gpt2" byte-level BPE tokenizer. The prompts arrive as token ids, so the tokenizer is
never used, but llama.cpp refuses a model whose tokenizer does not load. q8_0 comes
from llama.cpp's own quantizer (`llama_model_quantize`) run on the f32 file, so that the
q8_0 weights are the ones a llama.cpp user would have. Both files are cached in the
temporary folder under the sha256 of the model folder's files, so repeated runs and
fresh but byte-identical fixtures skip the conversion.

The timing drives llama.cpp's C API (llama_batch / llama_decode) through
llama-cpp-python's low-level bindings rather than the `Llama` class, which decodes one
sequence at a time: each prompt is its own sequence id, the prefill packs the prompts
into llama_decode calls of n_batch tokens (llama.cpp's default 2048, split into
n_ubatch 512 inside), and every decode step is one llama_decode of one token per
sequence. Each decode step takes the greedy token of every row on the host (numpy over
llama.cpp's logits, as the engine chooses its tokens on the host) and the run makes
exactly --new-tokens tokens per row, ignoring EOS: prefill time ends with the last
prompt token's logits, decode time is the first token's choice plus new_tokens - 1 steps,
the split `runner bench` and the transformers peer use. The Python work per step (filling
numpy arrays that the batch points at, an argmax) is tens of microseconds against steps
of milliseconds. llama-batched-bench (tools/batched-bench in the same sdist, built with
cmake) times the same llama_decode calls and agreed with this within 6% on prefill and 2%
on decode on the small qwen2 fixture; the bindings are used because pip builds only the
library and because they keep the model loaded between bench_compare.py's interleaved
rounds.

Each batch size gets its own context, made the first time it runs and kept: n_seq_max is
the batch, every sequence has its own KV stream (kv_unified off, llama.cpp's advice when
sequences share no prefix, and the engine's layout: a row attends to its own cache), the
KV cache is llama.cpp's default f16 unless --kv-type says otherwise, flash attention is
on unless --no-flash-attn (llama.cpp's default, auto, turns it on for the CPU; at the
small fixture's head size of 32 its decode is about half the speed of the plain path,
its prefill faster). Contexts made only when a batch size first runs keep the
peak RSS of a batch size to what it and the smaller ones needed.

llama.cpp's threads meet at a spinning barrier after every graph node: with --threads
equal to the cores and another busy process on the machine, a preempted thread stalls
the others for a scheduler slice at each node, and decode slowed 7-100x beside a
compiler (the engine's work-stealing pool lost under 2x). Figures are only comparable on
an idle machine.

llama.cpp's extra weight buffer types are off unless --extra-bufts. On x86 the only one
these weights can use is AMX (CPU_REPACK has no x86 layout for q8_0 or f32), and its
q8_0 kernels crash with a segmentation fault on the machine this was written on (a Xeon
with amx_int8 under a VM) as soon as a matrix product has two or more rows; without them
q8_0 runs llama.cpp's AVX-512 VNNI dot products and f32 is unchanged.
"""

import argparse
import ctypes
import hashlib
import json
import os
import struct
import sys
import tempfile
import time
from importlib.metadata import version

import gguf
import llama_cpp as lc
import numpy as np
from bench_record import record

BINDING_VERSION = version("llama_cpp_python")

# Bumped when the conversion changes, so that old cached files are not reused.
CONVERTER_VERSION = 1

QUANTIZATIONS = {"q8_0": lc.LLAMA_FTYPE_MOSTLY_Q8_0}
KV_TYPES = {"f16": lc.GGML_TYPE_F16, "f32": lc.GGML_TYPE_F32, "q8_0": lc.GGML_TYPE_Q8_0}

# llama.cpp's pre-tokenizer name for each architecture's byte-level BPE split (the
# regex the fixtures' tokenizers use, see the fixture's tokenizer.rs).
PRE_TOKENIZERS = {"qwen2": "qwen2", "llama": "llama-bpe"}


# --- Weights ---------------------------------------------------------------------


def _read_safetensors(path):
    """Tensors of one safetensors file as numpy arrays (f32), without torch or the
    safetensors package: the format is an 8-byte header length, a JSON header, the data."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = data[start:end]
        dtype = info["dtype"]
        if dtype == "F32":
            arr = raw.view(np.float32)
        elif dtype == "F16":
            arr = raw.view(np.float16).astype(np.float32)
        elif dtype == "BF16":
            arr = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: tensor {name} is {dtype}; only F32/F16/BF16 convert")
        out[name] = arr.reshape(info["shape"])
    return out


def _weight_files(model_dir):
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if not files:
        raise SystemExit(f"{model_dir}: no .safetensors file")
    return [os.path.join(model_dir, f) for f in files]


def _permute_for_llama(w, n_head):
    """HF llama checkpoints order each head's rotary halves for rotate_half; llama.cpp's
    llama architecture rotates interleaved pairs, so q and k rows are reordered as
    convert_hf_to_gguf.py does (qwen2 uses NEOX rotation and needs nothing)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def _llama3_rope_factors(cfg, head_dim):
    """Llama 3's rope scaling as llama.cpp takes it: a divisor per frequency in a
    `rope_freqs` tensor, computed as convert_hf_to_gguf.py computes it."""
    rs = cfg["rope_scaling"]
    base = float(cfg.get("rope_theta", 10000.0))
    factor = rs.get("factor", 8.0)
    low, high = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old_ctx = rs.get("original_max_position_embeddings", 8192)
    freqs = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * np.pi / freqs
    smooth = (old_ctx / wavelen - low) / (high - low)
    between = 1 / ((1 - smooth) / factor + smooth)
    out = np.where(
        wavelen < old_ctx / high, 1.0, np.where(wavelen > old_ctx / low, factor, between)
    )
    return out.astype(np.float32)


def _vocab(model_dir, n_vocab):
    """tokenizer.json's tokens by id, padded to the embedding's rows as
    convert_hf_to_gguf.py pads them, with llama.cpp's token types."""
    tok = json.load(open(os.path.join(model_dir, "tokenizer.json")))
    by_id = {i: t for t, i in tok["model"]["vocab"].items()}
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    for i, a in added.items():
        by_id[i] = a["content"]
    tokens, types = [], []
    for i in range(n_vocab):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(by_id[i])
            types.append(
                gguf.TokenType.CONTROL if added[i].get("special") else gguf.TokenType.USER_DEFINED
            )
        else:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def convert(model_dir, out_path):
    """Writes the model folder as an f32 GGUF file that llama.cpp loads."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    arch_name = cfg.get("model_type")
    if arch_name not in PRE_TOKENIZERS:
        raise SystemExit(f"{model_dir}: model_type {arch_name!r}; converts qwen2 and llama")
    arch = {"qwen2": gguf.MODEL_ARCH.QWEN2, "llama": gguf.MODEL_ARCH.LLAMA}[arch_name]
    scaling = cfg.get("rope_scaling") or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type not in ("default", "llama3", None):
        raise SystemExit(f"{model_dir}: rope_scaling {scaling} is not converted here")

    tensors = {}
    for f in _weight_files(model_dir):
        tensors.update(_read_safetensors(f))
    n_layer = cfg["num_hidden_layers"]
    n_head = cfg["num_attention_heads"]
    n_head_kv = cfg.get("num_key_value_heads", n_head)
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head
    n_vocab = tensors["model.embed_tokens.weight"].shape[0]

    w = gguf.GGUFWriter(out_path, gguf.MODEL_ARCH_NAMES[arch])
    w.add_name(os.path.basename(os.path.normpath(model_dir)))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(cfg.get("max_position_embeddings", 32768))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(n_layer)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(n_vocab)

    tokens, types = _vocab(model_dir, n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(PRE_TOKENIZERS[arch_name])
    w.add_token_list(tokens)
    w.add_token_types(types)
    # Merges and the special token ids (bos/eos/pad, add_bos) from tokenizer.json and
    # tokenizer_config.json, as convert_hf_to_gguf.py takes them.
    gguf.SpecialVocab(model_dir, load_merges=True, n_vocab=n_vocab).add_to_gguf(w)

    if rope_type == "llama3":
        w.add_tensor(
            gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight",
            _llama3_rope_factors(cfg, head_dim),
        )
    names = gguf.get_tensor_name_map(arch, n_layer)
    for name, arr in tensors.items():
        if name.endswith("rotary_emb.inv_freq"):
            continue
        if arch_name == "llama" and name.endswith("q_proj.weight"):
            arr = _permute_for_llama(arr, n_head)
        elif arch_name == "llama" and name.endswith("k_proj.weight"):
            arr = _permute_for_llama(arr, n_head_kv)
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise SystemExit(f"{model_dir}: no llama.cpp name for tensor {name}")
        w.add_tensor(new, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _model_key(model_dir):
    h = hashlib.sha256(f"converter {CONVERTER_VERSION}\n".encode())
    for name in sorted(os.listdir(model_dir)):
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path) or not name.endswith((".json", ".safetensors")):
            continue
        h.update(name.encode() + b"\0")
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()[:20]


def gguf_file(model_dir, quantization=None, threads=2):
    """The cached GGUF file of `model_dir` (f32, or llama.cpp-quantized), made if missing.
    Files are written under a temporary name and renamed, so that an interrupted run
    leaves nothing half-written to be reused."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise SystemExit(
            f"--quantization {quantization}: llama.cpp peer knows {list(QUANTIZATIONS)}"
        )
    cache = os.path.join(tempfile.gettempdir(), "bench-llamacpp-gguf", _model_key(model_dir))
    os.makedirs(cache, exist_ok=True)
    f32 = os.path.join(cache, "model-f32.gguf")
    if not os.path.exists(f32):
        print(f"converting {model_dir} to GGUF f32 ...", file=sys.stderr, flush=True)
        tmp = f"{f32}.{os.getpid()}.tmp"
        convert(model_dir, tmp)
        os.replace(tmp, f32)
    if quantization is None:
        return f32
    out = os.path.join(cache, f"model-{quantization}.gguf")
    if not os.path.exists(out):
        print(f"quantizing to {quantization} with llama.cpp ...", file=sys.stderr, flush=True)
        _quiet_logs()
        params = lc.llama_model_quantize_default_params()
        params.ftype = QUANTIZATIONS[quantization]
        params.nthread = threads
        tmp = f"{out}.{os.getpid()}.tmp"
        if lc.llama_model_quantize(f32.encode(), tmp.encode(), ctypes.byref(params)) != 0:
            raise SystemExit(f"llama_model_quantize to {quantization} failed")
        os.replace(tmp, out)
    return out


# --- Timing ----------------------------------------------------------------------


_last_level = [0]


@lc.llama_log_callback
def _errors_only(level, text, _user):
    # GGML_LOG_LEVEL_ERROR is 4; CONT (5) continues the previous message at its level.
    if level != 5:
        _last_level[0] = level
    if _last_level[0] == 4:
        sys.stderr.write(text.decode(errors="replace"))


def _quiet_logs():
    lc.llama_log_set(_errors_only, ctypes.c_void_p(0))


class Batch:
    """A llama_batch whose arrays are numpy arrays, so that filling one takes a few
    vectorized stores rather than a ctypes store per token and field."""

    def __init__(self, capacity):
        self.token = np.zeros(capacity, np.int32)
        self.pos = np.zeros(capacity, np.int32)
        self.n_seq_id = np.ones(capacity, np.int32)
        self.seq = np.zeros(capacity, np.int32)
        self.logits = np.zeros(capacity, np.int8)
        seq_base = self.seq.ctypes.data
        self.seq_ptrs = (ctypes.POINTER(ctypes.c_int32) * capacity)(
            *(
                ctypes.cast(seq_base + 4 * i, ctypes.POINTER(ctypes.c_int32))
                for i in range(capacity)
            )
        )
        self.c = lc.llama_batch()
        ptr = lambda a, t: a.ctypes.data_as(ctypes.POINTER(t))  # noqa: E731
        self.c.token = ptr(self.token, ctypes.c_int32)
        self.c.embd = ctypes.POINTER(ctypes.c_float)()
        self.c.pos = ptr(self.pos, ctypes.c_int32)
        self.c.n_seq_id = ptr(self.n_seq_id, ctypes.c_int32)
        self.c.seq_id = ctypes.cast(self.seq_ptrs, type(self.c.seq_id))
        self.c.logits = ptr(self.logits, ctypes.c_int8)

    def fill(self, token, pos, seq, logits):
        n = len(token)
        self.token[:n], self.pos[:n], self.seq[:n], self.logits[:n] = token, pos, seq, logits
        self.c.n_tokens = n


class Peer:
    """A loaded GGUF model and, per batch size, a context sized for it."""

    def __init__(self, path, threads, flash_attn, kv_type, label, extra_bufts=False):
        _quiet_logs()
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        mp.use_extra_bufts = extra_bufts
        self.model = lc.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise SystemExit(f"llama.cpp could not load {path}")
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        self.threads, self.flash_attn, self.kv_type = threads, flash_attn, kv_type
        self.extra_bufts = extra_bufts
        self.label = label
        self.contexts = {}

    def context(self, rows, tokens_per_row):
        key = (rows, tokens_per_row)
        if key not in self.contexts:
            cp = lc.llama_context_default_params()
            per_row = -(-tokens_per_row // 256) * 256
            cp.n_ctx = rows * per_row
            cp.n_seq_max = rows
            cp.n_threads = cp.n_threads_batch = self.threads
            cp.flash_attn_type = (
                lc.LLAMA_FLASH_ATTN_TYPE_ENABLED
                if self.flash_attn
                else lc.LLAMA_FLASH_ATTN_TYPE_DISABLED
            )
            cp.type_k = cp.type_v = KV_TYPES[self.kv_type]
            cp.kv_unified = False
            ctx = lc.llama_init_from_model(self.model, cp)
            if not ctx:
                raise SystemExit(f"llama.cpp could not make a context for {rows} x {per_row}")
            batch = Batch(max(lc.llama_n_batch(ctx), rows))
            self.contexts[key] = (ctx, batch)
        return self.contexts[key]

    def describe(self):
        return (
            f"llama.cpp (llama-cpp-python {BINDING_VERSION}, {self.label}, {self.threads} threads, "
            f"flash attention {'on' if self.flash_attn else 'off'}, KV {self.kv_type}"
            f"{', extra buffer types' if self.extra_bufts else ''})"
        )


def load(
    model_dir, quantization=None, threads=2, flash_attn=True, kv_type="f16", extra_bufts=False
):
    """Converts (or finds cached) and loads the model; contexts come with `run`. A
    `.gguf` file is loaded as it is (its own quantization; `quantization` must be None)."""
    if model_dir.endswith(".gguf"):
        if quantization is not None:
            raise SystemExit(f"{model_dir}: a GGUF file keeps its own types; drop --quantization")
        path, label = model_dir, f"GGUF file {os.path.basename(model_dir)}"
    else:
        path = gguf_file(model_dir, quantization, threads)
        label = f"GGUF {quantization or 'f32'}"
    return Peer(path, threads, flash_attn, kv_type, label, extra_bufts)


def run(peer, prompts, new_tokens):
    """(prefill seconds, decode seconds) of one batch of same-length prompts."""
    rows, n = len(prompts), len(prompts[0])
    ctx, batch = peer.context(rows, n + new_tokens)
    lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
    cap = lc.llama_n_batch(ctx)
    flat = np.asarray(prompts, np.int32).reshape(-1)
    pos = np.tile(np.arange(n, dtype=np.int32), rows)
    seq = np.repeat(np.arange(rows, dtype=np.int32), n)
    last = (pos == n - 1).astype(np.int8)
    logits = np.empty((rows, peer.n_vocab), np.float32)

    t0 = time.perf_counter()
    for start in range(0, len(flat), cap):
        end = min(start + cap, len(flat))
        batch.fill(flat[start:end], pos[start:end], seq[start:end], last[start:end])
        if lc.llama_decode(ctx, batch.c) != 0:
            raise SystemExit("llama_decode failed in the prefill (KV cache full?)")
        for i in np.flatnonzero(last[start:end]):
            row = lc.llama_get_logits_ith(ctx, int(i))
            logits[seq[start + i]] = np.ctypeslib.as_array(row, shape=(peer.n_vocab,))
    lc.llama_synchronize(ctx)
    prefill_s = time.perf_counter() - t0

    seqs = np.arange(rows, dtype=np.int32)
    ones = np.ones(rows, np.int8)
    t1 = time.perf_counter()
    for step in range(new_tokens):
        nxt = logits.argmax(axis=1).astype(np.int32)
        if step + 1 == new_tokens:
            break
        batch.fill(nxt, np.full(rows, n + step, np.int32), seqs, ones)
        if lc.llama_decode(ctx, batch.c) != 0:
            raise SystemExit("llama_decode failed in a decode step (KV cache full?)")
        logits = np.ctypeslib.as_array(lc.llama_get_logits(ctx), shape=(rows, peer.n_vocab))
    decode_s = time.perf_counter() - t1
    return prefill_s, decode_s


def measure(peer, prompts, new_tokens, repeat=1):
    """One batch size: median timings over `repeat` runs, as a `runner bench` record."""
    runs = [run(peer, prompts, new_tokens) for _ in range(max(1, repeat))]
    return record(peer.describe(), runs, prompts, new_tokens)


def warm_up(peer, prompts):
    """One untimed short run, as the engine and the transformers peer do."""
    run(peer, prompts[:1], 2)


def one_round(peer, prompts, batches, new_tokens):
    """Every batch size once, in order: {batch: record}."""
    return {b: measure(peer, prompts[:b], new_tokens) for b in batches}


def engine_prompts(vocab, rows, tokens):
    """The prompts `runner bench` makes (its `prompts` function in
    runner/engine/src/bench/engine.rs), for a run without --prompts; a saved file
    from the engine is the authority when there is one."""
    mask = (1 << 64) - 1
    state = 0x6265_6E63_6820_7031
    out = []
    for _ in range(rows):
        row = []
        for _ in range(tokens):
            state = (state * 6364136223846793005 + 1442695040888963407) & mask
            row.append((state >> 33) % max(vocab, 1))
        out.append(row)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--model", required=True, help="a model folder in the Hugging Face layout, or a .gguf file"
    )
    ap.add_argument("--prompts", help="token ids from `runner bench --save-prompts`")
    ap.add_argument("--prompt-tokens", type=int, default=1500, help="without --prompts")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--quantization", choices=sorted(QUANTIZATIONS), help="default: f32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv-type", choices=sorted(KV_TYPES), default="f16")
    ap.add_argument("--no-flash-attn", action="store_true")
    ap.add_argument("--extra-bufts", action="store_true", help="llama.cpp's AMX/repacked weights")
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs per batch size; medians are reported"
    )
    args = ap.parse_args()

    batches = [int(x) for x in args.batch.split(",")]
    peer = load(
        args.model,
        args.quantization,
        args.threads,
        not args.no_flash_attn,
        args.kv_type,
        args.extra_bufts,
    )
    if args.prompts:
        prompts = json.load(open(args.prompts))
    else:
        prompts = engine_prompts(peer.n_vocab, max(batches), args.prompt_tokens)
    if len(prompts) < max(batches):
        raise SystemExit(
            f"{args.prompts} holds {len(prompts)} prompts; --batch needs {max(batches)}"
        )
    warm_up(peer, prompts)
    for b in batches:
        print(json.dumps(measure(peer, prompts[:b], args.new_tokens, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
