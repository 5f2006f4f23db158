//! bf16 and q8_0 weights against f32 on real checkpoints, teacher-forced: each format is
//! fed the f32 greedy continuation of a real CREG prompt (transformers' f32 tokens,
//! which the f32 engine reproduces up to near-ties: parity.rs), and its greedy choice at
//! every position is compared with f32's. Each real prompt's prefill costs seconds on
//! two cores, so CI takes the first CREG_REAL_AGREEMENT_PROMPTS (default 4) of the
//! reference's 24 (docs/real-models.md quotes what CI measures).

use crate::{load, real, reference, GEMMA3, SMOLLM2};
use runner_engine::candle::weights::DTypeChoice;

fn prompts() -> usize {
    std::env::var("CREG_REAL_AGREEMENT_PROMPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

/// Positions agreeing and positions compared, for `model` in a format.
fn agreement(
    model: &str,
    dtype: DTypeChoice,
    quantization: Option<&str>,
) -> Option<(usize, usize)> {
    let dir = real(model)?;
    let reference = reference(model);
    let engine = load(&dir, dtype, quantization);
    let (mut agree, mut total) = (0, 0);
    for case in reference
        .cases
        .iter()
        .filter(|c| c.task.is_some())
        .take(prompts())
    {
        let ids = engine.encode(&case.prompt()).unwrap();
        let greedy_at = engine.teacher_forced(&ids, &case.greedy).unwrap();
        assert_eq!(greedy_at.len(), case.greedy.len());
        agree += greedy_at
            .iter()
            .zip(&case.greedy)
            .filter(|(a, b)| a == b)
            .count();
        total += case.greedy.len();
    }
    let format = quantization.unwrap_or(match dtype {
        DTypeChoice::Bf16 => "bf16",
        _ => "f32",
    });
    println!(
        "{model} {format}: {agree} of {total} teacher-forced positions agree with f32 ({:.1}%)",
        100.0 * agree as f64 / total as f64
    );
    Some((agree, total))
}

/// At least `floor` of the positions agree. The floors sit below what was measured
/// (docs/real-models.md) by a margin for a sample of a few hundred positions.
#[track_caller]
fn at_least(found: Option<(usize, usize)>, floor: f64) {
    if let Some((agree, total)) = found {
        assert!(total > 0);
        let rate = agree as f64 / total as f64;
        assert!(
            rate >= floor,
            "{agree} of {total} ({rate:.4}) is under {floor}"
        );
    }
}

#[test]
fn smollm2_bf16_and_q8_0_pick_f32s_greedy_tokens() {
    at_least(agreement(SMOLLM2, DTypeChoice::Bf16, None), 0.98);
    at_least(agreement(SMOLLM2, DTypeChoice::Auto, Some("q8_0")), 0.97);
}

#[test]
fn gemma3_bf16_and_q8_0_pick_f32s_greedy_tokens() {
    at_least(agreement(GEMMA3, DTypeChoice::Bf16, None), 0.98);
    at_least(agreement(GEMMA3, DTypeChoice::Auto, Some("q8_0")), 0.97);
}
