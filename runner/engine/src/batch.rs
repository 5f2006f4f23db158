//! How full a backend kept its decode batch: counted by the engine, written to the run
//! folder by the run loop and shown by the reports, so it sits with the types every
//! stage shares rather than in the engine.

use serde::{Deserialize, Serialize};

/// What utilization means, in the words the terminal and the reports use.
pub const UTILIZATION_MEANING: &str = "rows decoded per row-step offered";

/// How well a backend kept its decode batch full, summed over decode steps.
///
/// A row-step is one row of the batch's capacity in one decode step (a forward pass
/// over the running rows' last tokens): each step offers as many as the row limit
/// allows and work exists for (rows decoding, being prefilled, or waiting), so rows
/// left empty while work waits count against utilization, and a batch that drains at
/// the very end of the work does not. A row's first token comes from its prompt's
/// prefill, not from a decode step.
// Written to run folders: a field added later must leave older files readable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchStats {
    /// Decode steps (forward passes over running rows).
    pub steps: usize,
    /// Rows decoded, summed over decode steps: the tokens decode steps produced.
    pub rows_decoded: usize,
    /// Row capacity offered, summed over decode steps (see above).
    pub row_steps: usize,
    /// Tokens chosen, first tokens and end tokens included: each is one row's useful work.
    pub generated_tokens: usize,
    /// Times newcomers joined the running batch (each copies the batch's KV cache once).
    pub joins: usize,
    /// Rows a newcomer took in place of a finished row (each a copy of that row alone).
    pub refills: usize,
    /// Bytes of logits read back from the device for token choice (none on the CPU,
    /// which reads them in place).
    pub logits_read_bytes: usize,
}

impl BatchStats {
    /// Rows decoded per row-step offered, 0 to 1; None before any decode step.
    pub fn utilization(&self) -> Option<f64> {
        (self.row_steps > 0).then(|| self.rows_decoded as f64 / self.row_steps as f64)
    }

    /// The work done between two readings of a backend's running totals.
    pub fn since(&self, earlier: &BatchStats) -> BatchStats {
        BatchStats {
            steps: self.steps.saturating_sub(earlier.steps),
            rows_decoded: self.rows_decoded.saturating_sub(earlier.rows_decoded),
            row_steps: self.row_steps.saturating_sub(earlier.row_steps),
            generated_tokens: self
                .generated_tokens
                .saturating_sub(earlier.generated_tokens),
            joins: self.joins.saturating_sub(earlier.joins),
            refills: self.refills.saturating_sub(earlier.refills),
            logits_read_bytes: self
                .logits_read_bytes
                .saturating_sub(earlier.logits_read_bytes),
        }
    }

    /// The work of two spans together (pooled utilization is a ratio of sums).
    pub fn plus(&self, other: &BatchStats) -> BatchStats {
        BatchStats {
            steps: self.steps + other.steps,
            rows_decoded: self.rows_decoded + other.rows_decoded,
            row_steps: self.row_steps + other.row_steps,
            generated_tokens: self.generated_tokens + other.generated_tokens,
            joins: self.joins + other.joins,
            refills: self.refills + other.refills,
            logits_read_bytes: self.logits_read_bytes + other.logits_read_bytes,
        }
    }

    /// `0.934 (8,739 rows decoded / 9,355 row-steps, 180 decode steps)`; None before any
    /// decode step.
    pub fn describe(&self) -> Option<String> {
        let u = self.utilization()?;
        Some(format!(
            "{u:.3} ({} rows decoded / {} row-steps, {} decode steps)",
            grouped(self.rows_decoded),
            grouped(self.row_steps),
            grouped(self.steps)
        ))
    }
}

/// `n` with thousands separated by commas, as a paper prints counts.
pub(crate) fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_print_with_thousands_separators() {
        let cases = [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (9355, "9,355"),
            (1234567, "1,234,567"),
        ];
        for (n, want) in cases {
            assert_eq!(grouped(n), want);
        }
    }

    #[test]
    fn describe_gives_the_ratio_and_its_parts_and_nothing_before_a_step() {
        let b = BatchStats {
            steps: 180,
            rows_decoded: 8739,
            row_steps: 9355,
            generated_tokens: 8739,
            joins: 3,
            refills: 5,
            logits_read_bytes: 4096,
        };
        assert_eq!(
            b.describe().unwrap(),
            "0.934 (8,739 rows decoded / 9,355 row-steps, 180 decode steps)"
        );
        assert_eq!(BatchStats::default().describe(), None);
        let twice = b.plus(&b);
        assert_eq!(
            (
                twice.row_steps,
                twice.joins,
                twice.refills,
                twice.logits_read_bytes
            ),
            (18710, 6, 10, 8192)
        );
        assert_eq!(twice.since(&b), b);
    }

    #[test]
    fn a_record_missing_later_fields_still_reads() {
        let b: BatchStats = serde_json::from_str(r#"{"steps": 2, "row_steps": 8}"#).unwrap();
        assert_eq!(
            (
                b.steps,
                b.row_steps,
                b.joins,
                b.refills,
                b.logits_read_bytes
            ),
            (2, 8, 0, 0, 0)
        );
    }
}
