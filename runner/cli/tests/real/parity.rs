//! The engine in f32 against transformers in f32 on real checkpoints and real CREG
//! prompts (scripts/real_parity.py): the prompt's token ids are transformers' exactly,
//! and 128 greedy tokens are identical up to the first position where transformers' own
//! two best logits are less than 1e-3 apart (where rounding in either may pick the
//! other). The table of first divergences is printed (`--nocapture` shows it).

use crate::{load, real, reference, Reference, GEMMA3, QWEN2_5, QWEN2_5_1_5B, SMOLLM2};
use runner_engine::candle::weights::DTypeChoice;
use runner_engine::digest::sha256_hex;
use runner_engine::{Backend, Request, RequestId, Sampling};

/// Below this gap between transformers' two best logits, either implementation's
/// rounding may choose the other token.
pub const NEAR_TIE: f32 = 1e-3;

/// The first position of `got` that differs from `want` (a shorter one differs where it
/// ends).
pub fn first_divergence(got: &[u32], want: &[u32]) -> Option<usize> {
    let n = got.len().min(want.len());
    (0..n)
        .find(|&i| got[i] != want[i])
        .or((got.len() != want.len()).then_some(n))
}

fn parity(model: &str) {
    let Some(dir) = real(model) else { return };
    let reference: Reference = reference(model);
    let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
    assert_eq!(
        sha256_hex(&weights),
        reference.weights_sha256,
        "{model}: the weights differ from those the reference was made on; rerun \
         scripts/real_parity.py"
    );
    drop(weights);
    let mut engine = load(&dir, DTypeChoice::F32, None);
    assert_eq!(
        engine.template().is_plain(),
        reference.prompt_format == "plain",
        "{model}: prompt format"
    );
    // The 24 CREG prompts go through the four tasks within each condition, in turn. CI
    // decodes the diagonal (task i % 4 under condition i / 4 % 4: six prompts, every task
    // and every condition) and the longest prompt (whose positions pass those of the
    // shorter long one), as the CPU time of 24 2,000-token prompts on two models is most
    // of its budget; all with CREG_REAL_PARITY_ALL=1.
    let every = std::env::var_os("CREG_REAL_PARITY_ALL").is_some();
    let longest = reference
        .cases
        .iter()
        .filter(|c| c.task.is_none())
        .map(|c| c.prompt_ids.len())
        .max();
    let cases: Vec<_> = reference
        .cases
        .iter()
        .filter(|c| {
            let long = c.task.is_none();
            every || (long && Some(c.prompt_ids.len()) == longest) || c.on_the_diagonal()
        })
        .collect();
    let mut requests = Vec::new();
    for case in &cases {
        let ids = engine.encode(&case.prompt()).unwrap();
        assert_eq!(
            first_divergence(&ids, &case.prompt_ids),
            None,
            "{model} {}: the prompt's token ids differ from transformers' ({} vs {} ids)",
            case.name,
            ids.len(),
            case.prompt_ids.len()
        );
        requests.push(Request {
            id: RequestId::new(&case.name),
            prompt: case.prompt(),
            seeds: vec![0],
            max_new_tokens: reference.new_tokens,
            sampling: Sampling::Greedy,
        });
    }
    let samples = engine.generate(&requests).unwrap();
    let mut failures = Vec::new();
    println!(
        "| {model} prompt | prompt tokens | new tokens | first divergence | transformers' gap there | first gap < 1e-3 |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (case, sample) in cases.iter().zip(&samples) {
        assert_eq!(sample.request_id.as_str(), case.name);
        let tie = case.gaps.iter().position(|&g| g < NEAR_TIE);
        let diverged = first_divergence(&sample.token_ids, &case.greedy);
        let gap = diverged
            .and_then(|i| case.gaps.get(i))
            .map_or("–".to_string(), |g| format!("{g:.2e}"));
        println!(
            "| {} | {} | {} | {} | {gap} | {} |",
            case.name,
            case.prompt_ids.len(),
            case.greedy.len(),
            diverged.map_or("none".to_string(), |i| i.to_string()),
            tie.map_or("none".to_string(), |i| i.to_string()),
        );
        // Identical up to the first near-tie (or throughout without one).
        if let Some(at) = diverged {
            if tie.is_none_or(|t| at < t) {
                failures.push(format!(
                    "{}: diverges at {at} (gap {gap}) before any near-tie ({tie:?}): engine {:?} vs transformers {:?}",
                    case.name,
                    &sample.token_ids[at.saturating_sub(2)..(at + 3).min(sample.token_ids.len())],
                    &case.greedy[at.saturating_sub(2)..(at + 3).min(case.greedy.len())],
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{model}:\n{}", failures.join("\n"));
}

#[test]
fn smollm2_decodes_real_creg_prompts_as_transformers_does() {
    parity(SMOLLM2);
}

#[test]
fn gemma3_base_decodes_real_creg_prompts_as_transformers_does() {
    parity(GEMMA3);
}

#[test]
fn qwen2_5_coder_0_5b_decodes_real_creg_prompts_as_transformers_does() {
    parity(QWEN2_5);
}

/// Run by scripts/real-qwen-1.5b (the weights are not in CI).
#[test]
fn qwen2_5_coder_1_5b_decodes_real_creg_prompts_as_transformers_does() {
    parity(QWEN2_5_1_5B);
}

#[test]
fn first_divergence_finds_the_first_difference_or_the_shorter_end() {
    assert_eq!(first_divergence(&[1, 2, 3], &[1, 2, 3]), None);
    assert_eq!(first_divergence(&[1, 2, 3], &[1, 9, 3]), Some(1));
    assert_eq!(first_divergence(&[1, 2], &[1, 2, 3]), Some(2));
}
