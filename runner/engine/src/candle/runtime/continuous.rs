//! Continuous batching: the loop that asks the scheduler what each step does and has the
//! model runner do it, so that a finished row's place goes to a waiting prompt at once.

use crate::candle::runtime::kv_cache::KvCache;
use crate::candle::runtime::model_runner::{ModelRunner, RowDraw};
use crate::candle::runtime::phases::PhaseTimes;
use crate::candle::runtime::rows::{self, Row};
use crate::candle::runtime::scheduler::{AliveKv, CachePlan, CacheShape, Demand, Policy};
use crate::candle::Engine;
use crate::{BatchStats, EngineError, Request, Sample};
use candle_core::Tensor;
use std::collections::VecDeque;
use std::time::Instant;

/// A prompt being prefilled, not yet in the batch.
struct Incoming<'a> {
    request: &'a Request,
    prompt: &'a [u32],
    cache: KvCache,
    logits: Option<Tensor>,
    prefill_s: f64,
}

impl Incoming<'_> {
    fn rows(&self) -> usize {
        self.request.seeds.len()
    }

    fn demand(&self) -> Demand {
        Demand::of(self.request, self.prompt.len())
    }
}

/// A newcomer that joins the batch: its prefilled prompt and the rows still decoding
/// after its first token.
type Joining<'r, 'a> = (&'r Incoming<'a>, Vec<Row<'a>>);

/// The work of one call: the prompts waiting, those being prefilled, and the cache's
/// places with the rows in them.
struct Batch<'a, 'e> {
    engine: &'e Engine,
    runner: ModelRunner<'e>,
    policy: Policy,
    pending: &'a [(&'a Request, Vec<u32>)],
    queue: VecDeque<usize>,
    /// Rows of the requests not yet decoding (waiting or being prefilled).
    waiting_rows: usize,
    incoming: Vec<Incoming<'a>>,
    /// One entry per row of the cache: a row being decoded, or a finished row's place.
    places: Vec<Option<Row<'a>>>,
    cache: Option<KvCache>,
    /// The last forward pass's logits, one row per place.
    logits: Option<Tensor>,
    /// A step runs from its forward pass until its tokens are chosen: on a GPU the
    /// forward pass only queues kernels, and the wait falls in the logits transfer.
    step_start: Option<Instant>,
}

/// Decodes `pending` (request, prompt ids) with continuous batching, handing over each
/// sample as it finishes; `peak` is the most rows the device held (for the retry after
/// an out-of-memory error).
///
/// Each step: the running rows choose their tokens and the finished ones are handed
/// over; waiting prompts are admitted and prefilled, one prompt at a time in its own
/// cache, in chunks within the step's token budget, so that the running rows keep
/// decoding between chunks; newcomers whose prompts are in choose their first token,
/// one row per seed; then the cache makes room for them ([`CachePlan`]), and one
/// forward pass decodes every row. A finished row's place stays in the batch, decoding
/// a dummy token, until a newcomer takes it. Full copies of the cache are counted in
/// [`BatchStats::joins`], rows taken in place in [`BatchStats::refills`].
pub(crate) fn run(
    engine: &Engine,
    pending: &[(&Request, Vec<u32>)],
    stats: &mut BatchStats,
    times: &mut PhaseTimes,
    peak: &mut usize,
    on_sample: &mut dyn FnMut(Sample),
) -> Result<(), EngineError> {
    let mut batch = Batch {
        engine,
        runner: ModelRunner::new(engine),
        policy: engine.policy(),
        pending,
        queue: (0..pending.len()).collect(),
        waiting_rows: pending.iter().map(|(r, _)| r.seeds.len()).sum(),
        incoming: Vec::new(),
        places: Vec::new(),
        cache: None,
        logits: None,
        step_start: None,
    };
    loop {
        let mut chosen = batch.choose_running(stats, times, on_sample)?;
        batch.admit()?;
        *peak = (*peak).max(batch.rows_on_device());
        batch.prefill(times)?;
        let ready = batch.take_ready();
        let joining = batch.first_tokens(&ready, stats, times, on_sample)?;
        chosen += ready.iter().map(Incoming::rows).sum::<usize>();
        stats.generated_tokens += chosen;
        batch.engine.activity.generated(chosen);

        let waiting = !batch.queue.is_empty() || !batch.incoming.is_empty();
        if !batch.make_room(joining, waiting, stats, times)? {
            if !waiting {
                return Ok(());
            }
            continue;
        }
        // The newcomers' own caches are copied in: free them before the forward pass.
        drop(ready);
        batch.decode_step(stats, times)?;
    }
}

impl<'a> Batch<'a, '_> {
    /// The running rows' next tokens, from the last forward pass; finished rows are
    /// handed over and leave their places empty. Returns the tokens chosen.
    fn choose_running(
        &mut self,
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<usize, EngineError> {
        let Some(logits) = self.logits.take() else {
            return Ok(0);
        };
        let live = live_places(&self.places);
        let logits = self.runner.rows_of(logits, &live, self.places.len())?;
        let draws: Vec<RowDraw> = self.places.iter().flatten().map(Row::draw).collect();
        let next = self.runner.choose(&logits, &draws, stats, times)?;
        if let Some(t) = self.step_start.take() {
            let dt = t.elapsed().as_secs_f64();
            self.places
                .iter_mut()
                .flatten()
                .for_each(|r| r.decode_s += dt);
        }
        for (&i, token) in live.iter().zip(next) {
            let row = self.places[i].take().expect("a live place holds a row");
            self.places[i] = rows::advance(self.engine, row, token, times, on_sample)?;
        }
        Ok(live.len())
    }

    /// Takes waiting prompts in, in order, while the scheduler admits them beside the
    /// rows decoding and the prompts being prefilled.
    fn admit(&mut self) -> Result<(), EngineError> {
        if !self.engine.activity.admitting() {
            // Draining (a first Ctrl-C): the prompts still waiting are left for a resume.
            for i in self.queue.drain(..) {
                self.waiting_rows -= self.pending[i].0.seeds.len();
            }
            return Ok(());
        }
        let running = self.places.iter().flatten().map(Row::demand);
        let per_token = self.policy.kv_bytes_per_token;
        let alive = AliveKv {
            running: self.cache.as_ref().map_or(0, KvCache::bytes),
            // A prompt cache is reserved to its prompt's length when it is made.
            prompts: self
                .incoming
                .iter()
                .map(|i| i.prompt.len() * per_token)
                .sum(),
        };
        let mut admission = self.policy.admission(
            running.chain(self.incoming.iter().map(Incoming::demand)),
            alive,
        );
        let pending = self.pending;
        while let Some(&next) = self.queue.front() {
            let (request, prompt) = &pending[next];
            if !admission.admits(Demand::of(request, prompt.len())) {
                break;
            }
            self.queue.pop_front();
            self.incoming.push(Incoming {
                request,
                prompt,
                cache: self.runner.prompt_cache(prompt.len())?,
                logits: None,
                prefill_s: 0.0,
            });
        }
        Ok(())
    }

    /// Rows on the device: the places and the rows of the prompts being prefilled.
    fn rows_on_device(&self) -> usize {
        self.places.len() + self.incoming.iter().map(Incoming::rows).sum::<usize>()
    }

    /// Runs the prefill chunks the scheduler gives this step.
    fn prefill(&mut self, times: &mut PhaseTimes) -> Result<(), EngineError> {
        let remaining: Vec<usize> = self
            .incoming
            .iter()
            .map(|i| match i.logits {
                Some(_) => 0,
                None => i.prompt.len() - i.cache.slots(),
            })
            .collect();
        let total: usize = self.incoming.iter().map(|i| i.prompt.len()).sum();
        let mut done = total - remaining.iter().sum::<usize>();
        for chunk in self.policy.prefill_chunks(&remaining) {
            self.engine.activity.prefilling(done, total);
            done += chunk.len;
            let inc = &mut self.incoming[chunk.prompt];
            let t = Instant::now();
            inc.logits = self
                .runner
                .prefill_chunk(inc.prompt, &mut inc.cache, chunk.len)?;
            let dt = t.elapsed().as_secs_f64();
            inc.prefill_s += dt;
            times.prefill_s += dt;
        }
        self.engine.activity.prefilling(done, total);
        Ok(())
    }

    /// The newcomers whose prompts are all in, out of the prefilling.
    fn take_ready(&mut self) -> Vec<Incoming<'a>> {
        let (ready, still) = std::mem::take(&mut self.incoming)
            .into_iter()
            .partition(|i| i.logits.is_some());
        self.incoming = still;
        ready
    }

    /// The first token of each of the `ready` newcomers' rows, one per seed; finished
    /// rows are handed over at once, and the newcomers with rows left join.
    fn first_tokens<'r>(
        &mut self,
        ready: &'r [Incoming<'a>],
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<Vec<Joining<'r, 'a>>, EngineError> {
        if ready.is_empty() {
            return Ok(Vec::new());
        }
        let mut new_rows = Vec::new();
        let mut prompts = Vec::new();
        for inc in ready {
            self.waiting_rows -= inc.rows();
            let logits = inc.logits.as_ref().expect("ready newcomers have logits");
            prompts.push((logits, inc.rows()));
            for &seed in &inc.request.seeds {
                new_rows.push(Row::new(inc.request, seed, inc.prompt.len(), inc.prefill_s));
            }
        }
        let first = self.runner.fork_logits(&prompts)?;
        let draws: Vec<RowDraw> = new_rows.iter().map(Row::draw).collect();
        let next = self.runner.choose(&first, &draws, stats, times)?;
        let mut new_rows = new_rows.into_iter().zip(next);
        let mut joining = Vec::new();
        for inc in ready {
            let mut survivors = Vec::new();
            for (row, token) in new_rows.by_ref().take(inc.rows()) {
                survivors.extend(rows::advance(self.engine, row, token, times, on_sample)?);
            }
            if !survivors.is_empty() {
                joining.push((inc, survivors));
            }
        }
        Ok(joining)
    }

    /// Gives the newcomers rows of the cache and lets go of finished rows' places, as
    /// the scheduler's [`CachePlan`] says; false when no row is left to decode.
    fn make_room(
        &mut self,
        joining: Vec<Joining<'_, 'a>>,
        waiting: bool,
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<bool, EngineError> {
        let places: Vec<Option<Demand>> = self
            .places
            .iter()
            .map(|p| p.as_ref().map(Row::demand))
            .collect();
        let newcomers: Vec<Demand> = joining
            .iter()
            .map(|(inc, rows)| Demand {
                rows: rows.len(),
                ..inc.demand()
            })
            .collect();
        let shape = self.cache.as_ref().map(|c| CacheShape {
            pad: c.pad(),
            slots: c.slots(),
            capacity: c.capacity(),
        });
        let plan = self.policy.cache_plan(&places, shape, &newcomers, waiting);
        let cache = self.cache.take();
        self.cache = match plan {
            CachePlan::Empty => {
                self.places.clear();
                return Ok(false);
            }
            CachePlan::Keep => cache,
            CachePlan::Gather => {
                let mut c = cache.expect("a gather keeps rows of the cache");
                self.gather(&mut c, times)?;
                Some(c)
            }
            CachePlan::Place { at, then_gather } => {
                let mut c = cache.expect("newcomers take places in the cache");
                let mut at = at.into_iter();
                for (inc, rows) in joining {
                    for row in rows {
                        let i = at.next().expect("a place for every newcomer");
                        self.runner.place(&mut c, i, &inc.cache, stats, times)?;
                        self.places[i] = Some(row);
                    }
                }
                if then_gather {
                    self.gather(&mut c, times)?;
                }
                Some(c)
            }
            CachePlan::Join { capacity } => {
                Some(self.join(cache, joining, capacity, stats, times)?)
            }
        };
        Ok(true)
    }

    /// Keeps only the places holding a row, in the cache and the table.
    fn gather(&mut self, cache: &mut KvCache, times: &mut PhaseTimes) -> Result<(), EngineError> {
        let live = live_places(&self.places);
        self.runner.gather(cache, &live, times)?;
        self.places.retain(Option::is_some);
        Ok(())
    }

    /// One copy of the running rows and the newcomers into a new cache; the places
    /// become the running rows, then the newcomers'.
    fn join(
        &mut self,
        cache: Option<KvCache>,
        joining: Vec<Joining<'_, 'a>>,
        capacity: usize,
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<KvCache, EngineError> {
        let live = live_places(&self.places);
        // The running cache goes into the join whole, so that it is freed layer by layer
        // as it is copied.
        let running = cache.filter(|_| !live.is_empty());
        let newcomers: Vec<(&KvCache, usize)> = joining
            .iter()
            .map(|(inc, rows)| (&inc.cache, rows.len()))
            .collect();
        let c = self.runner.join(
            running.map(|c| (c, live.as_slice())),
            &newcomers,
            capacity,
            stats,
            times,
        )?;
        self.places.retain(Option::is_some);
        for (_, rows) in joining {
            self.places.extend(rows.into_iter().map(Some));
        }
        Ok(c)
    }

    /// One forward pass over every place; a finished row's place decodes any token
    /// until a newcomer takes it.
    fn decode_step(
        &mut self,
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<(), EngineError> {
        self.runner.simulated_out_of_memory(self.places.len())?;
        let live = self.places.iter().flatten().count();
        self.engine.activity.decoding(live);
        stats.steps += 1;
        stats.rows_decoded += live;
        stats.row_steps += self.policy.limits.max_rows.min(live + self.waiting_rows);
        self.step_start = Some(Instant::now());
        let last: Vec<u32> = self
            .places
            .iter()
            .map(|p| p.as_ref().map_or(0, Row::last_token))
            .collect();
        let cache = self.cache.as_mut().expect("a batch with rows has a cache");
        self.logits = Some(self.runner.decode_step(last, cache, times)?);
        Ok(())
    }
}

/// The positions of the places holding a row.
fn live_places(places: &[Option<Row>]) -> Vec<usize> {
    (0..places.len()).filter(|&i| places[i].is_some()).collect()
}
