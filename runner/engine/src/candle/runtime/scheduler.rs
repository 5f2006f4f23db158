//! The scheduler's policy: which rows run, what each step prefills, and what becomes of
//! finished rows' places, decided from plain numbers so that it reads apart from the work.

use crate::candle::runtime::device::row_limit;
use crate::candle::runtime::kv_cache::join_peak_bytes;
use crate::Request;
use std::ops::Range;

/// How much work one forward pass may take on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Sequences decoded together (seeds count separately).
    pub max_rows: usize,
    /// Prompt tokens (padded rows x longest prompt) in one prefill pass; bounds the
    /// attention score tensor of prefill.
    pub prefill_tokens: usize,
    /// Bytes the KV cache of one group of rows may take: rows x (longest prompt + new
    /// tokens) x the model's KV bytes per token. Measured at load time from the free
    /// memory of the device.
    pub kv_budget_bytes: usize,
}

/// Rows decoded together at most, whatever the KV budget allows: the logits of a step
/// (rows x vocabulary in f32) must fit beside the cache too.
pub const ROW_CAP: usize = 1024;

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_rows: ROW_CAP,
            prefill_tokens: 4096,
            kv_budget_bytes: usize::MAX,
        }
    }
}

/// How requests share the decode batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Batching {
    /// A finished row's place goes to the next waiting prompt at once.
    #[default]
    Continuous,
    /// Groups decode until their longest row is done: the benchmark's baseline.
    Static,
}

impl std::str::FromStr for Batching {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "continuous" => Ok(Batching::Continuous),
            "static" => Ok(Batching::Static),
            _ => Err(format!("unknown scheduler {s:?} (continuous, static)")),
        }
    }
}

/// What becomes of a finished row's place in the batch's KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refill {
    /// The place stays in the batch, empty, until a newcomer is written into it (a copy
    /// of that one row). A step costs a little more with places kept empty, but no
    /// copy of the whole cache is made when rows finish: on a GPU at hundreds of rows,
    /// where rows finish at nearly every step, such copies would cost more than the
    /// steps themselves (see docs/gpu-budget.md, section 5).
    #[default]
    InPlace,
    /// The place is dropped at once (one copy of the rows kept, unless newcomers join
    /// in the same step, which copies the batch once anyway); kept for `runner bench`
    /// to compare and for the invariance tests.
    Compact,
}

impl std::str::FromStr for Refill {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compact" => Ok(Refill::Compact),
            "in-place" => Ok(Refill::InPlace),
            _ => Err(format!("unknown refill {s:?} (compact, in-place)")),
        }
    }
}

/// Prefill chunks are whole multiples of this many tokens (the last one excepted). It
/// is a multiple of the fused CPU attention's query block, so a chunked prompt runs
/// exactly the blocks a whole one does; every other op computes a token from its own
/// row alone, so rows stay batch-invariant on the CPU however prompts are chunked.
pub const PREFILL_ALIGN: usize = 128;

/// What a request, or one row of it, asks of the batch: its rows (one per seed), its
/// prompt tokens and its cap of new tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Demand {
    pub rows: usize,
    pub prompt: usize,
    pub max_new: usize,
}

impl Demand {
    /// What `request` asks, with a prompt of `prompt` tokens: a row per seed.
    pub fn of(request: &Request, prompt: usize) -> Demand {
        Demand {
            rows: request.seeds.len(),
            prompt,
            max_new: request.max_new_tokens,
        }
    }

    /// Prompt and new tokens: the cache its rows may come to need.
    pub fn extent(&self) -> usize {
        self.prompt + self.max_new
    }
}

/// The scheduler's settings: the batch limits, the KV bytes of one token and how
/// finished rows' places are refilled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub limits: BatchLimits,
    pub kv_bytes_per_token: usize,
    pub refill: Refill,
    /// The model's layers: a join copies one layer at a time (see [`join_peak_bytes`]).
    pub layers: usize,
}

/// KV bytes alive when a step's admission is weighed: the running batch's cache, which
/// a join frees layer by layer as it copies it, and the prompt caches of the newcomers
/// being prefilled, which a join only reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AliveKv {
    pub running: usize,
    pub prompts: usize,
}

/// A newcomer's prefill work in one step: `len` more tokens of prompt number `prompt`
/// (in the order of the prompts being prefilled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PrefillChunk {
    pub prompt: usize,
    pub len: usize,
}

/// The rows admitted so far in a step, against which each waiting prompt is weighed.
pub(crate) struct Admission {
    policy: Policy,
    alive: AliveKv,
    rows: usize,
    /// The longest extent and the longest answer among the rows.
    extent: usize,
    answer: usize,
}

impl Admission {
    /// Takes `d` in if its rows fit the row limit and the KV budget beside the rows
    /// already in (see [`Policy::fits`]); the first rows always go in. Its prompt cache
    /// (one row, its prompt's length) is alive from then on.
    pub fn admits(&mut self, d: Demand) -> bool {
        let headroom = self.policy.headroom(self.answer.max(d.max_new));
        let alive = AliveKv {
            prompts: self.alive.prompts + d.prompt * self.policy.kv_bytes_per_token,
            ..self.alive
        };
        if !self
            .policy
            .fits(self.rows, self.extent, d.rows, d.extent(), headroom, alive)
        {
            return false;
        }
        self.alive = alive;
        self.rows += d.rows;
        self.extent = self.extent.max(d.extent());
        self.answer = self.answer.max(d.max_new);
        true
    }
}

/// The batch's cache as the cache plan sees it: each row's left padding, the slots in
/// use and the slots its buffers hold.
pub(crate) struct CacheShape<'a> {
    pub pad: &'a [usize],
    pub slots: usize,
    pub capacity: usize,
}

/// What the cache does before a step's forward pass, given the places of finished rows
/// and the newcomers whose first token is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CachePlan {
    /// No row is left to decode: the batch empties.
    Empty,
    /// The cache stays as it is.
    Keep,
    /// A gather keeps the rows in use and drops the empty places.
    Gather,
    /// Newcomer row `k` (in order) is written over the empty place `at[k]`, one row
    /// copied; then, if `then_gather`, a gather drops the empty places left.
    Place { at: Vec<usize>, then_gather: bool },
    /// One copy of the rows in use and the newcomers into a new cache with room for
    /// `capacity` slots; the newcomers' rows follow the running ones.
    Join { capacity: usize },
}

impl Policy {
    /// Tokens of one prefill chunk: the step's token budget rounded down to the
    /// alignment that keeps chunked prefill bit-identical to whole prefill.
    pub fn prefill_chunk(&self) -> usize {
        (self.limits.prefill_tokens / PREFILL_ALIGN).max(1) * PREFILL_ALIGN
    }

    /// Slots a joined cache keeps beyond its rows' extent: none when compacting; in
    /// place, two answers' worth (`max_new` tokens each). A newcomer takes a place only
    /// if its whole answer fits in the buffers, as every row's slots advance together:
    /// two answers' room lets newcomers take places for at least one answer's length of
    /// steps before a join copies the cache again. At the GPU's batch sizes a step reads
    /// every row's cache anyway, so the rows this costs where the KV budget binds cost
    /// little throughput; a copy of the cache at every step would cost much more.
    fn headroom(&self, max_new: usize) -> usize {
        match self.refill {
            Refill::Compact => 0,
            Refill::InPlace => 2 * max_new,
        }
    }

    /// Whether `rows` more rows reaching `extent` tokens fit the row limit and the KV
    /// budget beside the `taken` rows of longest extent `taken_extent`; the first rows
    /// always go in. `headroom` is what the cache keeps beyond every row's extent. The
    /// budget bounds the peak of the join that makes their cache: the new cache, and
    /// what is `alive` while it is made (see [`join_peak_bytes`]), not the new cache
    /// alone.
    fn fits(
        &self,
        taken: usize,
        taken_extent: usize,
        rows: usize,
        extent: usize,
        headroom: usize,
        alive: AliveKv,
    ) -> bool {
        if taken == 0 {
            return true;
        }
        let total = taken + rows;
        let joined = total
            .saturating_mul(taken_extent.max(extent) + headroom)
            .saturating_mul(self.kv_bytes_per_token);
        let peak = join_peak_bytes(alive.running, alive.prompts, joined, self.layers);
        total <= self.limits.max_rows && peak <= self.limits.kv_budget_bytes
    }

    /// The admission of a step whose batch already holds `running` (rows decoding and
    /// prompts being prefilled), whose caches hold `alive`.
    pub fn admission(
        &self,
        running: impl IntoIterator<Item = Demand>,
        alive: AliveKv,
    ) -> Admission {
        let mut a = Admission {
            policy: *self,
            alive,
            rows: 0,
            extent: 0,
            answer: 0,
        };
        for d in running {
            a.rows += d.rows;
            a.extent = a.extent.max(d.extent());
            a.answer = a.answer.max(d.max_new);
        }
        a
    }

    /// One step's prefill budget spent on the newcomers in order, `remaining[i]` prompt
    /// tokens of newcomer `i` still to run: whole chunks until the budget is spent, the
    /// last one running over it.
    pub fn prefill_chunks(&self, remaining: &[usize]) -> Vec<PrefillChunk> {
        let chunk = self.prefill_chunk();
        let mut budget = self.limits.prefill_tokens.max(chunk);
        let mut out = Vec::new();
        for (prompt, &left) in remaining.iter().enumerate() {
            let mut left = left;
            while budget > 0 && left > 0 {
                let len = chunk.min(left);
                out.push(PrefillChunk { prompt, len });
                left -= len;
                budget = budget.saturating_sub(len);
            }
        }
        out
    }

    /// Consecutive prompts (of lengths `lens`) prefilled together: a group grows while
    /// its padded tokens (rows x longest prompt) fit the prefill budget; a group holds
    /// at least one prompt.
    pub fn prefill_groups(&self, lens: &[usize]) -> Vec<Range<usize>> {
        let mut groups = Vec::new();
        let mut start = 0;
        while start < lens.len() {
            let mut end = start + 1;
            let mut longest = lens[start];
            while end < lens.len() {
                let l = longest.max(lens[end]);
                if l * (end + 1 - start) > self.limits.prefill_tokens {
                    break;
                }
                longest = l;
                end += 1;
            }
            groups.push(start..end);
            start = end;
        }
        groups
    }

    /// The end of the static group that starts at `start`: requests are added while
    /// their rows fit `max_rows` and the group's KV cache (rows x (longest prompt +
    /// longest budget of new tokens)) fits the KV budget; the first request always goes
    /// in.
    pub fn group_end(&self, pending: &[Demand], start: usize) -> usize {
        let (mut rows, mut longest_prompt, mut longest_new) = (0, 0, 0);
        let mut end = start;
        while end < pending.len() {
            let d = pending[end];
            let rows2 = rows + d.rows;
            let prompt2 = longest_prompt.max(d.prompt);
            let new2 = longest_new.max(d.max_new);
            let kv = rows2
                .saturating_mul(prompt2 + new2)
                .saturating_mul(self.kv_bytes_per_token);
            // The group's prefill caches are joined, layer by layer, into one about as
            // large: the peak is that cache and one layer more.
            let peak = join_peak_bytes(kv, 0, kv, self.layers);
            if end > start && (rows2 > self.limits.max_rows || peak > self.limits.kv_budget_bytes) {
                break;
            }
            (rows, longest_prompt, longest_new) = (rows2, prompt2, new2);
            end += 1;
        }
        end
    }

    /// What the cache does with `places` (one per row of the cache: a running row, or
    /// None for a finished row's place) and `newcomers` (each with the rows, at least
    /// one, still decoding after its first token) before the forward pass; `waiting`
    /// says whether prompts still wait to come in.
    ///
    /// Compacting ([`Refill::Compact`]), or where a newcomer cannot take a place: one
    /// copy of the cache drops the finished rows and adds the newcomers (left-padding
    /// the shorter rows), or without newcomers a gather keeps the rows in use. In place
    /// ([`Refill::InPlace`]): see [`Policy::place_plan`].
    pub fn cache_plan(
        &self,
        places: &[Option<Demand>],
        cache: Option<CacheShape>,
        newcomers: &[Demand],
        waiting: bool,
    ) -> CachePlan {
        let live = places.iter().filter(|p| p.is_some()).count();
        let cache = cache.filter(|_| live > 0);
        let joining: usize = newcomers.iter().map(|d| d.rows).sum();
        let Some(cache) = cache else {
            if joining == 0 {
                return CachePlan::Empty;
            }
            return CachePlan::Join {
                capacity: self.join_capacity(places, newcomers),
            };
        };
        if self.refill == Refill::InPlace {
            if let Some(plan) = self.place_plan(places, &cache, newcomers, waiting) {
                return plan;
            }
        }
        if newcomers.is_empty() {
            return match live < places.len() {
                true => CachePlan::Gather,
                false => CachePlan::Keep,
            };
        }
        CachePlan::Join {
            capacity: self.join_capacity(places, newcomers),
        }
    }

    /// In place: each newcomer row is written over a finished row's place, which needs
    /// a place for every newcomer and prompts no longer than the cache's slots (None
    /// where they do not fit); places nobody takes stay until one does. A gather still
    /// trims the cache when padding that every row skips passes a quarter of its slots
    /// (the rows that set its length have left), and at the end of the work once half
    /// the places are empty.
    fn place_plan(
        &self,
        places: &[Option<Demand>],
        cache: &CacheShape,
        newcomers: &[Demand],
        waiting: bool,
    ) -> Option<CachePlan> {
        let holes: Vec<usize> = (0..places.len()).filter(|&i| places[i].is_none()).collect();
        let joining: usize = newcomers.iter().map(|d| d.rows).sum();
        let slots = cache.slots;
        let fit = joining <= holes.len()
            && newcomers
                .iter()
                .all(|d| d.prompt <= slots && slots + d.max_new <= cache.capacity);
        if !fit {
            return None;
        }
        let at = holes[..joining].to_vec();
        // The places in use and their padding once the newcomers are in: a newcomer's
        // real slots end at the cache's last slot, as every row's do.
        let mut pad = cache.pad.to_vec();
        let mut used: Vec<bool> = places.iter().map(Option::is_some).collect();
        let mut taken = at.iter();
        for d in newcomers {
            for &i in taken.by_ref().take(d.rows) {
                pad[i] = slots - d.prompt;
                used[i] = true;
            }
        }
        let empty = holes.len() - joining;
        let shared = (0..places.len())
            .filter(|&i| used[i])
            .map(|i| pad[i])
            .min()
            .unwrap_or(0);
        let then_gather = shared * 4 > slots || (!waiting && empty * 2 >= places.len());
        Some(match (at.is_empty(), then_gather) {
            (true, true) => CachePlan::Gather,
            (true, false) => CachePlan::Keep,
            (false, _) => CachePlan::Place { at, then_gather },
        })
    }

    /// Room for the longest row to finish without regrowing (and the headroom for
    /// newcomers to take places), within what the KV budget was checked against.
    fn join_capacity(&self, places: &[Option<Demand>], newcomers: &[Demand]) -> usize {
        let rows = || places.iter().flatten().chain(newcomers);
        let extent = rows().map(Demand::extent).max().unwrap_or(0);
        let longest_answer = rows().map(|d| d.max_new).max().unwrap_or(0);
        extent + self.headroom(longest_answer)
    }

    /// The row limit after an out-of-memory error with `peak` rows on the device (a
    /// continuous batch's most, a static group's rows): half as many, where that is at
    /// least one and below the present limit (None: give up).
    pub fn rows_after_out_of_memory(&self, peak: usize) -> Option<usize> {
        let half = peak / 2;
        (half >= 1 && half < self.limits.max_rows).then_some(half)
    }

    /// Rows of `tokens_per_row` tokens each that decode together: the KV budget's
    /// share and the row limit, at least one.
    pub fn row_limit(&self, tokens_per_row: usize) -> usize {
        row_limit(
            self.limits.kv_budget_bytes,
            self.kv_bytes_per_token,
            tokens_per_row,
        )
        .min(self.limits.max_rows)
    }

    /// Splits a request whose seeds need more rows than decode together (the row
    /// limit, `--max-batch`, or what the KV budget holds for its prompt and answer)
    /// into requests of as many seeds as fit, each prefilled on its own. The scheduler
    /// admits a request's rows together, and always admits the first request, so
    /// unsplit such a request would overrun both limits. A row's tokens depend only on
    /// its request and seed, so the samples are the whole request's.
    pub fn split_seeds(&self, pending: Vec<(Request, Vec<u32>)>) -> Vec<(Request, Vec<u32>)> {
        let mut out = Vec::with_capacity(pending.len());
        for (r, ids) in pending {
            let fit = self.row_limit(ids.len() + r.max_new_tokens).max(1);
            if r.seeds.len() <= fit {
                out.push((r, ids));
                continue;
            }
            for seeds in r.seeds.chunks(fit) {
                let part = Request {
                    seeds: seeds.to_vec(),
                    ..r.clone()
                };
                out.push((part, ids.clone()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
