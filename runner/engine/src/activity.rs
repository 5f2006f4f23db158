//! What a backend is doing between samples, for a progress line that would otherwise
//! wait minutes for the first sample to finish: the prompt tokens prefilled, the rows
//! decoding, and the tokens generated so far, as counters a backend sets while it
//! works and another thread reads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters a backend updates as it works; cheap to set from the decode loop.
#[derive(Debug, Default)]
pub struct Activity {
    prompt_done: AtomicU64,
    prompt_total: AtomicU64,
    rows: AtomicU64,
    tokens: AtomicU64,
    /// Set by a first Ctrl-C: the backend starts no new prompt and lets the rows it is
    /// decoding finish (see [`Activity::stop_admitting`]).
    draining: AtomicBool,
}

/// One reading of [`Activity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reading {
    /// Prompt tokens of the prompts being prefilled now: done and in all.
    pub prompt_done: u64,
    pub prompt_total: u64,
    /// Rows decoding in the last forward pass.
    pub rows: u64,
    /// Tokens generated since the backend was made, finished samples or not.
    pub tokens: u64,
}

impl Activity {
    /// The prompts being prefilled have `done` of their `total` tokens in the cache.
    pub fn prefilling(&self, done: usize, total: usize) {
        self.prompt_done.store(done as u64, Ordering::Relaxed);
        self.prompt_total.store(total as u64, Ordering::Relaxed);
    }

    /// `rows` rows decode in the forward pass about to run.
    pub fn decoding(&self, rows: usize) {
        self.rows.store(rows as u64, Ordering::Relaxed);
    }

    /// `n` more tokens were chosen.
    pub fn generated(&self, n: usize) {
        self.tokens.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Nothing is prefilled or decoded (a call ended).
    pub fn idle(&self) {
        self.prefilling(0, 0);
        self.decoding(0);
    }

    /// No new prompt starts from now on: the rows decoding (and the prompts being
    /// prefilled) finish and are handed over, the waiting ones are left for a resume,
    /// and the call returns once the rows in flight are done.
    pub fn stop_admitting(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Whether new prompts may still start (no [`Activity::stop_admitting`] yet).
    pub fn admitting(&self) -> bool {
        !self.draining.load(Ordering::Relaxed)
    }

    pub fn read(&self) -> Reading {
        Reading {
            prompt_done: self.prompt_done.load(Ordering::Relaxed),
            prompt_total: self.prompt_total.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
            tokens: self.tokens.load(Ordering::Relaxed),
        }
    }
}

impl Reading {
    /// What the backend is doing, in words: `prefilling 512 of 1,536 prompt tokens`,
    /// `decoding 8 rows`, both, or nothing when idle.
    pub fn state(&self) -> String {
        let mut parts = Vec::new();
        if self.prompt_total > self.prompt_done {
            parts.push(format!(
                "prefilling {} of {} prompt tokens",
                crate::batch::grouped(self.prompt_done as usize),
                crate::batch::grouped(self.prompt_total as usize)
            ));
        }
        match self.rows {
            0 => {}
            1 => parts.push("decoding 1 row".into()),
            n => parts.push(format!("decoding {n} rows")),
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_names_the_prefill_and_the_rows_decoding() {
        let a = Activity::default();
        assert_eq!(a.read().state(), "");
        a.prefilling(512, 1536);
        assert_eq!(a.read().state(), "prefilling 512 of 1,536 prompt tokens");
        a.decoding(8);
        assert_eq!(
            a.read().state(),
            "prefilling 512 of 1,536 prompt tokens, decoding 8 rows"
        );
        a.prefilling(1536, 1536);
        assert_eq!(a.read().state(), "decoding 8 rows");
        a.generated(8);
        a.generated(8);
        assert_eq!(a.read().tokens, 16);
        a.idle();
        assert_eq!(a.read().state(), "");
        assert_eq!(a.read().tokens, 16, "idle keeps the count");
    }
}
