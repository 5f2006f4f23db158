//! Sampling at the protocol's settings (temperature 0.2, top-p 0.9, seeds 42-44) on a
//! real checkpoint and real CREG prompts: each sample's tokens are the same whether its
//! request is decoded alone, with the others at a row limit of 2, or with all of them
//! in another order. Real trained logits are peaked, unlike a fixture's, so this is
//! where a nucleus cut that depends on the batch would show.

use crate::{load, real, reference, SMOLLM2};
use runner_engine::candle::weights::DTypeChoice;
use runner_engine::candle::BatchLimits;
use runner_engine::{Backend, Request, RequestId, Sample};
use std::collections::BTreeMap;

type Tokens = BTreeMap<(String, u64), Vec<u32>>;

fn tokens(samples: &[Sample]) -> Tokens {
    samples
        .iter()
        .map(|s| {
            (
                (s.request_id.as_str().to_string(), s.seed),
                s.token_ids.clone(),
            )
        })
        .collect()
}

#[test]
fn protocol_sampling_on_smollm2_does_not_depend_on_the_batch() {
    let Some(dir) = real(SMOLLM2) else { return };
    let reference = reference(SMOLLM2);
    let requests: Vec<Request> = reference
        .cases
        .iter()
        .filter(|c| c.task.is_some())
        .take(2)
        .map(|c| Request {
            id: RequestId::new(&c.name),
            prompt: c.prompt(),
            seeds: vec![42, 43, 44],
            max_new_tokens: 128,
            sampling: runner_core::protocol::SAMPLING,
        })
        .collect();
    let mut engine = load(&dir, DTypeChoice::F32, None);
    let mut alone = Tokens::new();
    for r in &requests {
        alone.extend(tokens(&engine.generate(std::slice::from_ref(r)).unwrap()));
    }
    assert_eq!(alone.len(), 6);
    let distinct: std::collections::BTreeSet<_> = alone.values().collect();
    println!(
        "{} distinct answers among 6 samples of 2 prompts",
        distinct.len()
    );
    let limits = engine.limits();
    let mut paired = engine.with_limits(BatchLimits {
        max_rows: 2,
        ..limits
    });
    assert_eq!(
        tokens(&paired.generate(&requests).unwrap()),
        alone,
        "row limit 2"
    );
    let mut all = paired.with_limits(limits);
    let reversed: Vec<Request> = requests.iter().rev().cloned().collect();
    assert_eq!(
        tokens(&all.generate(&reversed).unwrap()),
        alone,
        "all together, reversed"
    );
}
