//! The benchmark's decoding protocol, which every suite's plan and every report share:
//! nucleus sampling at temperature 0.2 and top-p 0.9, three seeds, 512 new tokens. The
//! engine decodes whatever a request asks and knows no protocol; the models' own
//! generation_config defaults (top-k, repetition penalty) are deliberately not used,
//! so that every model is sampled alike.

use runner_engine::Sampling;

/// The protocol's sampling.
pub const SAMPLING: Sampling = Sampling::TopP {
    temperature: 0.2,
    top_p: 0.9,
};

/// The protocol's generation seeds.
pub const SEEDS: [u64; 3] = [42, 43, 44];

/// The protocol's budget of new tokens per sample.
pub const MAX_NEW_TOKENS: usize = 512;
