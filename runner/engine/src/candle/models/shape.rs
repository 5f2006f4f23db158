//! The sizes a config.json gives, checked before anything divides by them or sizes
//! memory from them, and against the checkpoint they must describe. A hostile or broken
//! config otherwise panics (zero heads), runs a model without its layers (zero layers),
//! or reports figures for a model that is not there.

use crate::candle::checkpoint::Checkpoint;
use std::collections::BTreeSet;

/// The sizes of one parsed config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub vocab: usize,
    pub hidden: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl Shape {
    /// Refuses sizes no model has: zero, heads that do not group, or products that
    /// overflow. The message names the field.
    pub fn check(&self) -> Result<(), String> {
        let fields = [
            ("vocab_size", self.vocab),
            ("hidden_size", self.hidden),
            ("intermediate_size", self.intermediate),
            ("num_hidden_layers", self.layers),
            ("num_attention_heads", self.heads),
            ("num_key_value_heads", self.kv_heads),
            ("head_dim", self.head_dim),
        ];
        if let Some((field, _)) = fields.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{field} is 0; a model needs at least 1"));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                self.heads, self.kv_heads
            ));
        }
        let products = [
            ("vocab_size x hidden_size", [self.vocab, self.hidden, 1, 1]),
            (
                "hidden_size x intermediate_size",
                [self.hidden, self.intermediate, 1, 1],
            ),
            (
                "num_attention_heads x head_dim",
                [self.heads, self.head_dim, self.hidden, 1],
            ),
            (
                "num_hidden_layers x num_key_value_heads x head_dim",
                [self.layers, self.kv_heads, self.head_dim, 2],
            ),
        ];
        for (what, factors) in products {
            // Bytes of f32 values: what memory is sized in.
            if factors
                .iter()
                .try_fold(4usize, |n, &f| n.checked_mul(f))
                .is_none()
            {
                return Err(format!("{what} overflows: the sizes are not a model's"));
            }
        }
        Ok(())
    }

    /// Refuses a config that describes another model than `checkpoint` holds: the
    /// embedding table's shape and the number of layers must match.
    pub fn against(&self, checkpoint: &Checkpoint) -> Result<(), String> {
        let tensors = checkpoint.tensors();
        if let Some((name, t)) = tensors
            .iter()
            .find(|(n, _)| n.ends_with("embed_tokens.weight"))
        {
            if t.shape != [self.vocab, self.hidden] {
                return Err(format!(
                    "vocab_size {} and hidden_size {} disagree with the checkpoint, whose {name} \
                     is {:?}: the config is not this checkpoint's",
                    self.vocab, self.hidden, t.shape
                ));
            }
        }
        let stored: BTreeSet<usize> = tensors.keys().filter_map(|n| layer_of(n)).collect();
        let want: BTreeSet<usize> = (0..self.layers).collect();
        if !stored.is_empty() && stored != want {
            return Err(format!(
                "num_hidden_layers {} disagrees with the checkpoint, which holds {} layers \
                 (numbered {}..={}): the config is not this checkpoint's",
                self.layers,
                stored.len(),
                stored.first().copied().unwrap_or_default(),
                stored.last().copied().unwrap_or_default()
            ));
        }
        Ok(())
    }
}

/// N of a decoder tensor `...model.layers.N....` (a vision tower's layers are not).
fn layer_of(name: &str) -> Option<usize> {
    let (_, rest) = name.split_once("model.layers.")?;
    rest.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: Shape = Shape {
        vocab: 512,
        hidden: 64,
        intermediate: 128,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        head_dim: 16,
    };

    #[test]
    fn zero_and_overflowing_sizes_are_refused_by_name() {
        assert!(TINY.check().is_ok());
        let zero_heads = Shape { heads: 0, ..TINY }.check().unwrap_err();
        assert!(
            zero_heads.contains("num_attention_heads is 0"),
            "{zero_heads}"
        );
        let zero_layers = Shape { layers: 0, ..TINY }.check().unwrap_err();
        assert!(
            zero_layers.contains("num_hidden_layers is 0"),
            "{zero_layers}"
        );
        let groups = Shape {
            kv_heads: 3,
            ..TINY
        }
        .check()
        .unwrap_err();
        assert!(groups.contains("not a multiple"), "{groups}");
        let huge = Shape {
            layers: usize::MAX / 2,
            ..TINY
        }
        .check()
        .unwrap_err();
        assert!(huge.contains("overflows"), "{huge}");
    }

    #[test]
    fn decoder_layers_are_told_from_a_vision_towers() {
        assert_eq!(layer_of("model.layers.12.mlp.up_proj.weight"), Some(12));
        assert_eq!(
            layer_of("language_model.model.layers.3.self_attn.q_proj.weight"),
            Some(3)
        );
        assert_eq!(
            layer_of("vision_tower.vision_model.encoder.layers.3.mlp.fc1.weight"),
            None
        );
        assert_eq!(layer_of("model.embed_tokens.weight"), None);
    }
}
