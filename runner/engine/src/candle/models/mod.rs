//! The architecture table: everything the engine and the fixtures know about one
//! architecture, in one row. `Engine::load` finds a row by config.json's `model_type`;
//! the fixture writer finds one by [`Arch`]. Adding an architecture is one model file
//! (or none, when the Llama decoder covers it with a flag) and one row here.

pub mod configs;
pub mod gemma3;
pub mod hf_config;
pub mod llama;
pub mod shape;

use crate::candle::chat_template::known;
use crate::candle::layers::SEPARATE;
pub use crate::candle::layers::{GateUpNames, QkvNames, TensorNames};
use crate::candle::CausalLm;
use candle_nn::VarBuilder;

/// An architecture the engine runs and the fixtures can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Qwen2,
    Llama,
    Gemma3,
    Phi3,
}

impl Arch {
    /// This architecture's row of [`ARCHITECTURES`].
    pub fn row(self) -> &'static Architecture {
        ARCHITECTURES
            .iter()
            .find(|a| a.arch == self)
            .expect("every Arch has a row")
    }
}

impl std::str::FromStr for Arch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match ARCHITECTURES.iter().find(|a| a.name == s) {
            Some(a) => Ok(a.arch),
            None => {
                let names: Vec<&str> = ARCHITECTURES.iter().map(|a| a.name).collect();
                Err(format!("unknown architecture {s:?} ({})", names.join(", ")))
            }
        }
    }
}

/// One architecture's parsed config.json.
pub trait ModelConfig {
    /// The sizes, for [`shape::Shape::check`] before anything else reads them.
    fn shape(&self) -> shape::Shape;

    /// Key and value elements one token keeps in the cache, over all layers.
    fn kv_values_per_token(&self) -> usize;

    fn load(
        &self,
        vb: VarBuilder,
        names: &TensorNames,
        weights: &crate::candle::layers::Weights,
    ) -> candle_core::Result<Box<dyn CausalLm>>;
}

/// Parses config.json's text; the error says which field is wrong or unsupported.
pub type ParseConfig = fn(&str) -> Result<Box<dyn ModelConfig>, String>;

/// Writes a fixture's config.json from its sizes and a token-id lookup.
pub type FixtureConfig = fn(&configs::Dims, &dyn Fn(&str) -> u32) -> serde_json::Value;

/// What the fixture writer needs beyond the tensor names.
pub struct FixtureFacts {
    /// Special tokens in the order they get ids (`fixture/tokenizer.rs` places them before
    /// or after the learned vocabulary as the family's real vocabulary does).
    pub specials: &'static [&'static str],
    pub bos: Option<&'static str>,
    /// Tokens that end a turn; the first is the tokenizer's eos_token.
    pub eos: &'static [&'static str],
    pub pad: &'static str,
    pub template: &'static str,
    /// Seed of the weights' generator.
    pub seed: u64,
    /// Whether the output head is the embedding matrix, for Tiny and for Small: both
    /// kinds of head get exercised.
    pub tied: [bool; 2],
    /// Biases on q, k and v.
    pub qkv_bias: bool,
    /// Gemma's norms: scales stored as offsets from 1, norms after attention and the
    /// MLP as well as before, and q and k normalised per head.
    pub gemma_norms: bool,
    pub config: FixtureConfig,
}

pub struct Architecture {
    pub arch: Arch,
    /// The name on the command line (`--arch`) and in test data files.
    pub name: &'static str,
    /// config.json `model_type` values this row loads.
    pub model_types: &'static [&'static str],
    pub parse: ParseConfig,
    /// The context of a config.json that omits `max_position_embeddings`: the config
    /// class's default where it has one (Gemma 3's multimodal configs leave it out);
    /// None where a config without it is refused.
    pub default_context: Option<usize>,
    pub tensors: TensorNames,
    pub fixture: FixtureFacts,
}

/// The row whose `model_types` include `model_type`.
pub fn by_model_type(model_type: &str) -> Option<&'static Architecture> {
    ARCHITECTURES
        .iter()
        .find(|a| a.model_types.contains(&model_type))
}

pub static ARCHITECTURES: [Architecture; 4] = [
    Architecture {
        arch: Arch::Qwen2,
        name: "qwen2",
        model_types: &["qwen2"],
        parse: llama::parse_qwen2,
        default_context: None,
        tensors: SEPARATE,
        fixture: FixtureFacts {
            specials: &[
                "<|endoftext|>",
                "<|im_start|>",
                "<|im_end|>",
                "<|object_ref_start|>",
                "<|object_ref_end|>",
                "<|box_start|>",
                "<|box_end|>",
                "<|quad_start|>",
                "<|quad_end|>",
                "<|vision_start|>",
                "<|vision_end|>",
                "<|vision_pad|>",
                "<|image_pad|>",
                "<|video_pad|>",
            ],
            bos: None,
            eos: &["<|im_end|>", "<|endoftext|>"],
            pad: "<|endoftext|>",
            template: known::QWEN2_5,
            seed: 1,
            tied: [true, false],
            qkv_bias: true,
            gemma_norms: false,
            config: configs::qwen2,
        },
    },
    Architecture {
        arch: Arch::Llama,
        name: "llama",
        model_types: &["llama"],
        parse: llama::parse_llama,
        default_context: None,
        tensors: SEPARATE,
        fixture: FixtureFacts {
            specials: &[
                "<|begin_of_text|>",
                "<|end_of_text|>",
                "<|reserved_special_token_0|>",
                "<|reserved_special_token_1|>",
                "<|finetune_right_pad_id|>",
                "<|reserved_special_token_2|>",
                "<|start_header_id|>",
                "<|end_header_id|>",
                "<|eom_id|>",
                "<|eot_id|>",
                "<|python_tag|>",
            ],
            bos: Some("<|begin_of_text|>"),
            eos: &["<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"],
            pad: "<|eot_id|>",
            template: known::LLAMA3_1,
            seed: 2,
            tied: [false, false],
            qkv_bias: false,
            gemma_norms: false,
            config: configs::llama,
        },
    },
    Architecture {
        arch: Arch::Gemma3,
        name: "gemma3",
        model_types: &["gemma3", "gemma3_text"],
        parse: gemma3::parse,
        default_context: Some(131_072),
        tensors: SEPARATE,
        fixture: FixtureFacts {
            specials: &[
                "<pad>",
                "<eos>",
                "<bos>",
                "<unk>",
                "<mask>",
                "<start_of_turn>",
                "<end_of_turn>",
            ],
            bos: Some("<bos>"),
            eos: &["<eos>", "<end_of_turn>"],
            pad: "<pad>",
            template: known::GEMMA3,
            seed: 3,
            tied: [true, true],
            qkv_bias: false,
            gemma_norms: true,
            config: configs::gemma3,
        },
    },
    Architecture {
        arch: Arch::Phi3,
        name: "phi3",
        model_types: &["phi3"],
        parse: llama::parse_phi3,
        default_context: None,
        tensors: TensorNames {
            qkv: QkvNames::Fused("qkv_proj"),
            gate_up: GateUpNames::Fused("gate_up_proj"),
        },
        fixture: FixtureFacts {
            specials: &[
                "<unk>",
                "<s>",
                "</s>",
                "<|endoftext|>",
                "<|assistant|>",
                "<|system|>",
                "<|end|>",
                "<|user|>",
            ],
            bos: Some("<s>"),
            eos: &["<|endoftext|>", "<|end|>"],
            pad: "<|endoftext|>",
            template: known::PHI3_5,
            seed: 4,
            tied: [false, false],
            qkv_bias: false,
            gemma_norms: false,
            config: configs::phi3,
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_model_types_lead_to_one_row_each() {
        for a in &ARCHITECTURES {
            assert_eq!(a.name.parse::<Arch>().unwrap(), a.arch);
            assert!(std::ptr::eq(a.arch.row(), a));
            for t in a.model_types {
                assert_eq!(by_model_type(t).unwrap().arch, a.arch);
            }
        }
        assert!(by_model_type("mistral").is_none());
        let err = "mistral".parse::<Arch>().unwrap_err();
        assert!(err.contains("qwen2, llama, gemma3, phi3"), "{err}");
    }
}
