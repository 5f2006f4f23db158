//! config.json of each architecture, as its Hugging Face config class writes it: the
//! registry's rows point here, and the fixture writer fills it with a fixture's sizes.

use serde_json::{json, Value};

/// The fixture's sizes, with the vocabulary the tokenizer ended up with.
pub struct Dims {
    pub hidden: usize,
    pub inner: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Tokens a local (sliding-window) layer sees.
    pub window: usize,
    pub vocab: usize,
    pub tied: bool,
}

pub fn qwen2(d: &Dims, id: &dyn Fn(&str) -> u32) -> Value {
    json!({
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "hidden_size": d.hidden,
            "intermediate_size": d.inner,
            "num_hidden_layers": d.layers,
            "num_attention_heads": d.heads,
            "num_key_value_heads": d.kv_heads,
            "hidden_act": "silu",
            "max_position_embeddings": 4096,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "tie_word_embeddings": d.tied,
            "use_sliding_window": false,
            "vocab_size": d.vocab,
            "bos_token_id": id("<|endoftext|>"),
            "eos_token_id": id("<|im_end|>"),
            "torch_dtype": "float32",
    })
}

pub fn llama(d: &Dims, id: &dyn Fn(&str) -> u32) -> Value {
    json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": d.hidden,
            "intermediate_size": d.inner,
            "num_hidden_layers": d.layers,
            "num_attention_heads": d.heads,
            "num_key_value_heads": d.kv_heads,
            "head_dim": d.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192
            },
            "attention_bias": false,
            "mlp_bias": false,
            "tie_word_embeddings": false,
            "vocab_size": d.vocab,
            "bos_token_id": id("<|begin_of_text|>"),
            "eos_token_id": [id("<|end_of_text|>"), id("<|eom_id|>"), id("<|eot_id|>")],
            "torch_dtype": "float32",
    })
}

pub fn gemma3(d: &Dims, id: &dyn Fn(&str) -> u32) -> Value {
    json!({
            "architectures": ["Gemma3ForCausalLM"],
            "model_type": "gemma3_text",
            "hidden_size": d.hidden,
            "intermediate_size": d.inner,
            "num_hidden_layers": d.layers,
            "num_attention_heads": d.heads,
            "num_key_value_heads": d.kv_heads,
            "head_dim": d.head_dim,
            "query_pre_attn_scalar": d.head_dim,
            "hidden_activation": "gelu_pytorch_tanh",
            "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "rope_local_base_freq": 10000.0,
            "rope_scaling": { "rope_type": "linear", "factor": 8.0 },
            "sliding_window": d.window,
            "sliding_window_pattern": 2,
            "layer_types": (0..d.layers)
                .map(|i| if (i + 1) % 2 == 0 { "full_attention" } else { "sliding_attention" })
                .collect::<Vec<_>>(),
            "final_logit_softcapping": null,
            "attn_logit_softcapping": null,
            "tie_word_embeddings": true,
            "vocab_size": d.vocab,
            "bos_token_id": id("<bos>"),
            "eos_token_id": [id("<eos>"), id("<end_of_turn>")],
            "pad_token_id": id("<pad>"),
            "torch_dtype": "float32",
    })
}

/// Phi-3 (mini, 4k context): fused projections, no biases, no RoPE scaling, and a
/// sliding window, which the fixture sets small enough that the tests cross it.
pub fn phi3(d: &Dims, id: &dyn Fn(&str) -> u32) -> Value {
    json!({
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        "hidden_size": d.hidden,
        "intermediate_size": d.inner,
        "num_hidden_layers": d.layers,
        "num_attention_heads": d.heads,
        "num_key_value_heads": d.kv_heads,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": null,
        "partial_rotary_factor": 1.0,
        "sliding_window": d.window,
        "attention_bias": false,
        "attention_dropout": 0.0,
        "embd_pdrop": 0.0,
        "resid_pdrop": 0.0,
        "tie_word_embeddings": d.tied,
        "vocab_size": d.vocab,
        "bos_token_id": id("<s>"),
        "eos_token_id": [id("<|endoftext|>"), id("<|end|>")],
        "pad_token_id": id("<|endoftext|>"),
        "torch_dtype": "float32",
    })
}
