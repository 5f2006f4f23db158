use super::*;

fn policy(max_rows: usize, kv_tokens: usize, refill: Refill) -> Policy {
    Policy {
        limits: BatchLimits {
            max_rows,
            prefill_tokens: 300,
            kv_budget_bytes: kv_tokens * 10,
        },
        kv_bytes_per_token: 10,
        refill,
        // Many layers: a join's one layer of overlap is negligible here; the test of
        // the peak sets its own.
        layers: 1000,
    }
}

fn demand(rows: usize, prompt: usize, max_new: usize) -> Demand {
    Demand {
        rows,
        prompt,
        max_new,
    }
}

#[test]
fn admission_takes_prompts_while_rows_and_kv_fit_and_always_the_first() {
    let none = AliveKv::default();
    let p = policy(4, 1000, Refill::Compact);
    let mut a = p.admission([], none);
    assert!(a.admits(demand(9, 5000, 10)), "the first rows always go in");
    assert!(!a.admits(demand(1, 1, 1)), "the row limit");

    // The budget holds the joined cache and the newcomers' prompt caches beside it.
    let mut a = p.admission([demand(1, 100, 50)], none);
    assert!(a.admits(demand(2, 150, 50)), "3 rows x 200 tokens + 150");
    assert!(!a.admits(demand(1, 200, 60)), "4 rows x 260 tokens");
    assert!(
        !a.admits(demand(1, 100, 50)),
        "4 rows x 200 tokens + 150 + 100"
    );
    assert!(
        a.admits(demand(1, 20, 50)),
        "4 rows x 200 tokens + 150 + 20"
    );

    // In place, the cache keeps two answers' room beyond the longest extent.
    let p = policy(4, 1200, Refill::InPlace);
    let mut a = p.admission([demand(1, 100, 50)], none);
    assert!(a.admits(demand(1, 100, 50)), "2 rows x (150 + 100) + 100");
    assert!(!a.admits(demand(2, 100, 60)), "4 rows x (160 + 120) + 200");
    assert!(a.admits(demand(2, 100, 50)), "4 rows x (150 + 100) + 200");
}

#[test]
fn admission_counts_what_is_alive_at_the_joins_peak() {
    // Two layers: a join holds one layer of the new cache beside all of the running
    // one, then all of the new cache beside one layer of the running one.
    let mut p = policy(8, 1000, Refill::Compact);
    p.layers = 2;
    // A running cache of 6,000 bytes (room for more slots than its row still needs).
    let alive = AliveKv {
        running: 6000,
        prompts: 0,
    };
    let mut a = p.admission([demand(1, 100, 50)], alive);
    // max(3,000 / 2 + 6,000, 3,000 + 6,000 / 2) + 1,000 of prompt cache = 8,500.
    assert!(a.admits(demand(1, 100, 50)));
    // The new cache alone (4,500) and the prompt caches (2,000) fit; with the running
    // cache still alive, max(2,250 + 6,000, 4,500 + 3,000) + 2,000 = 10,250 does not.
    assert!(!a.admits(demand(1, 100, 50)));
    let mut fresh = p.admission([demand(1, 100, 50)], AliveKv::default());
    assert!(fresh.admits(demand(1, 100, 50)));
    assert!(
        fresh.admits(demand(1, 100, 50)),
        "without the running cache it fits"
    );
}

#[test]
fn prefill_chunks_are_aligned_and_spend_the_budget_in_order() {
    let p = policy(8, usize::MAX / 10, Refill::InPlace);
    assert_eq!(p.prefill_chunk(), 256);
    let chunks = p.prefill_chunks(&[0, 600, 40]);
    let got: Vec<(usize, usize)> = chunks.iter().map(|c| (c.prompt, c.len)).collect();
    // A budget of 300: a whole chunk, then one more that runs over it.
    assert_eq!(got, [(1, 256), (1, 256)]);
    assert_eq!(
        p.prefill_chunks(&[100, 40]).len(),
        2,
        "short prompts share a step"
    );
}

#[test]
fn prefill_groups_keep_padded_tokens_within_the_budget() {
    let p = policy(8, usize::MAX / 10, Refill::InPlace);
    assert_eq!(
        p.prefill_groups(&[100, 100, 100, 400, 10]),
        [0..3, 3..4, 4..5]
    );
    assert!(p.prefill_groups(&[]).is_empty());
}

#[test]
fn static_groups_end_at_the_row_limit_or_the_kv_budget() {
    let p = policy(4, 700, Refill::InPlace);
    let pending = [demand(2, 100, 50), demand(2, 50, 100), demand(1, 10, 10)];
    // The longest prompt and the longest answer, each of its own request.
    assert_eq!(p.group_end(&pending, 0), 1, "4 rows x (100 + 100) tokens");
    assert_eq!(p.group_end(&pending, 1), 3);
    assert_eq!(p.group_end(&[demand(9, 900, 900)], 0), 1);
}

#[test]
fn the_row_limit_halves_after_running_out_of_memory() {
    let p = policy(6, usize::MAX / 10, Refill::InPlace);
    assert_eq!(p.rows_after_out_of_memory(6), Some(3));
    assert_eq!(p.rows_after_out_of_memory(1), None);
    assert_eq!(p.rows_after_out_of_memory(20), None, "not above the limit");
}

fn shape(pad: &[usize], slots: usize, capacity: usize) -> CacheShape<'_> {
    CacheShape {
        pad,
        slots,
        capacity,
    }
}

#[test]
fn newcomers_take_finished_rows_places_in_place_when_they_fit() {
    let p = policy(8, usize::MAX / 10, Refill::InPlace);
    let row = Some(demand(1, 100, 50));
    let places = [row, None, row, None];
    let pad = [0, 0, 10, 0];
    let one = [demand(1, 80, 50)];
    let plan = p.cache_plan(&places, Some(shape(&pad, 120, 300)), &one, true);
    assert_eq!(
        plan,
        CachePlan::Place {
            at: vec![1],
            then_gather: false
        }
    );
    // At the end of the work, half the places empty: the cache is gathered.
    let ending = [row, None, None, None];
    let plan = p.cache_plan(&ending, Some(shape(&pad, 120, 300)), &one, false);
    assert_eq!(
        plan,
        CachePlan::Place {
            at: vec![1],
            then_gather: true
        }
    );
    // No room for the answer, a prompt longer than the slots, more newcomers than
    // places: a join, with room for the longest row and two answers.
    let join = CachePlan::Join { capacity: 250 };
    assert_eq!(
        p.cache_plan(&places, Some(shape(&pad, 120, 160)), &one, true),
        join
    );
    let long = [demand(1, 121, 40)];
    assert_eq!(
        p.cache_plan(&places, Some(shape(&pad, 120, 300)), &long, true),
        CachePlan::Join { capacity: 261 }
    );
    let three = [demand(3, 80, 50)];
    assert_eq!(
        p.cache_plan(&places, Some(shape(&pad, 120, 300)), &three, true),
        join
    );
}

#[test]
fn without_newcomers_the_cache_is_kept_gathered_or_emptied() {
    let row = Some(demand(1, 100, 50));
    let compact = policy(8, usize::MAX / 10, Refill::Compact);
    let in_place = policy(8, usize::MAX / 10, Refill::InPlace);
    let pad = [0, 0, 0];
    let c = || Some(shape(&pad, 120, 300));
    assert_eq!(
        compact.cache_plan(&[row, None, row], c(), &[], true),
        CachePlan::Gather
    );
    assert_eq!(
        compact.cache_plan(&[row, row, row], c(), &[], true),
        CachePlan::Keep
    );
    assert_eq!(
        in_place.cache_plan(&[row, None, row], c(), &[], true),
        CachePlan::Keep
    );
    // Padding every row skips past a quarter of the slots: trimmed.
    let pad = [40, 31, 35];
    let trimmed = Some(shape(&pad, 120, 300));
    assert_eq!(
        in_place.cache_plan(&[row, row, row], trimmed, &[], true),
        CachePlan::Gather
    );
    assert_eq!(
        in_place.cache_plan(&[None, None], c(), &[], true),
        CachePlan::Empty
    );
    assert_eq!(in_place.cache_plan(&[], None, &[], true), CachePlan::Empty);
    assert_eq!(
        compact.cache_plan(&[None], c(), &[demand(2, 10, 5)], true),
        CachePlan::Join { capacity: 15 }
    );
}

#[test]
fn seeds_beyond_the_rows_that_fit_split_into_requests_of_their_own() {
    use crate::{Prompt, RequestId, Sampling};
    // 4 rows at most; a KV budget of 1,000 tokens: 10 rows of 100, 2 rows of 400.
    let p = policy(4, 1000, Refill::InPlace);
    let request = |id: &str, seeds: &[u64], max_new: usize| Request {
        id: RequestId::new(id),
        prompt: Prompt::Raw(String::new()),
        seeds: seeds.to_vec(),
        max_new_tokens: max_new,
        sampling: Sampling::Greedy,
    };
    let split = p.split_seeds(vec![
        (request("short", &[1, 2, 3, 4, 5, 6], 50), vec![0; 50]),
        (request("long", &[7, 8, 9], 200), vec![0; 200]),
        (request("fits", &[10], 10), vec![0; 10]),
    ]);
    let seeds: Vec<(&str, Vec<u64>)> = split
        .iter()
        .map(|(r, _)| (r.id.as_str(), r.seeds.clone()))
        .collect();
    assert_eq!(
        seeds,
        [
            ("short", vec![1, 2, 3, 4]),
            ("short", vec![5, 6]),
            ("long", vec![7, 8]),
            ("long", vec![9]),
            ("fits", vec![10]),
        ]
    );
    assert!(split.iter().all(|(r, ids)| ids.len()
        == match r.id.as_str() {
            "short" => 50,
            "long" => 200,
            _ => 10,
        }));
}
