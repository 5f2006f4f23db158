//! Hugging Face tensor names, which the layers load by, to the names llama.cpp's
//! converter gives the same tensors in a GGUF file.

/// The GGUF name of `hf` (`model.layers.3.self_attn.q_proj.weight` -> `blk.3.attn_q.weight`);
/// None for a tensor GGUF files do not hold. Llama's (and Qwen2's) `post_attention_layernorm` is the
/// norm before its MLP; Gemma's is one after attention, before its own
/// `pre_feedforward_layernorm`.
pub fn gguf_name(hf: &str, arch: &str) -> Option<String> {
    let rest = hf
        .strip_prefix("model.")
        .or_else(|| hf.strip_prefix("language_model.model."));
    let Some(rest) = rest else {
        return (hf == "lm_head.weight").then(|| "output.weight".to_string());
    };
    match rest {
        "embed_tokens.weight" => return Some("token_embd.weight".into()),
        "norm.weight" => return Some("output_norm.weight".into()),
        _ => {}
    }
    let rest = rest.strip_prefix("layers.")?;
    let (layer, tensor) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, suffix) = tensor.rsplit_once('.')?;
    let name = match module {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" if matches!(arch, "llama" | "qwen2") => "ffn_norm",
        "post_attention_layernorm" => "post_attention_norm",
        "pre_feedforward_layernorm" => "ffn_norm",
        "post_feedforward_layernorm" => "post_ffw_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    Some(format!("blk.{layer}.{name}.{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::gguf_name;

    #[test]
    fn hugging_face_names_map_to_llama_cpps() {
        let cases = [
            ("model.embed_tokens.weight", "llama", "token_embd.weight"),
            ("model.norm.weight", "gemma3", "output_norm.weight"),
            ("lm_head.weight", "llama", "output.weight"),
            (
                "model.layers.3.self_attn.q_proj.weight",
                "llama",
                "blk.3.attn_q.weight",
            ),
            (
                "model.layers.0.post_attention_layernorm.weight",
                "llama",
                "blk.0.ffn_norm.weight",
            ),
            (
                "model.layers.0.post_attention_layernorm.weight",
                "qwen2",
                "blk.0.ffn_norm.weight",
            ),
            (
                "model.layers.5.self_attn.k_proj.bias",
                "qwen2",
                "blk.5.attn_k.bias",
            ),
            (
                "model.layers.0.post_attention_layernorm.weight",
                "gemma3",
                "blk.0.post_attention_norm.weight",
            ),
            (
                "model.layers.17.pre_feedforward_layernorm.weight",
                "gemma3",
                "blk.17.ffn_norm.weight",
            ),
            (
                "model.layers.2.self_attn.k_norm.weight",
                "gemma3",
                "blk.2.attn_k_norm.weight",
            ),
            (
                "model.layers.2.mlp.down_proj.weight",
                "gemma3",
                "blk.2.ffn_down.weight",
            ),
        ];
        for (hf, arch, gguf) in cases {
            assert_eq!(gguf_name(hf, arch).as_deref(), Some(gguf), "{hf}");
        }
        assert_eq!(
            gguf_name("model.layers.x.mlp.up_proj.weight", "llama"),
            None
        );
        assert_eq!(gguf_name("vision_tower.weight", "gemma3"), None);
    }
}
