//! The samples behind a report, as the HTML's sample browser shows them: what
//! identifies each (model, condition, task, regime, seed, category), its output, the
//! parsed answer, the reference and its scores. Prompts and references are shared by
//! many samples (every seed of a request, every condition of a step) and are stored
//! once, keyed. Both parts travel gzip-compressed in the page and are inflated by the
//! browser after the first paint.

use crate::journal::SampleRecord;
use base64::Engine as _;
use runner_engine::finish::FinishReason;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// One sample as the browser lists it (short keys: there are tens of thousands).
#[derive(Clone, Debug, Serialize)]
pub struct BrowserSample {
    #[serde(rename = "m")]
    pub model: String,
    #[serde(rename = "c")]
    pub condition: String,
    #[serde(rename = "t")]
    pub task: String,
    #[serde(rename = "st")]
    pub step: usize,
    #[serde(rename = "sd")]
    pub seed: u64,
    #[serde(rename = "sc")]
    pub scenario: String,
    /// The regime (CREG) or another grouping; empty where there is none.
    #[serde(rename = "g")]
    pub group: String,
    #[serde(rename = "cat")]
    pub category: String,
    /// Further filters of this workload (a Probe item's hop, domain, ...), in display order.
    #[serde(rename = "f", skip_serializing_if = "Filters::is_empty")]
    pub filters: Filters,
    /// Why the sample failed its contract, where it did.
    #[serde(rename = "why", skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Per-sample metric values (booleans as 0/1).
    #[serde(rename = "x")]
    pub metrics: BTreeMap<String, f64>,
    /// The request id: the key of its prompt.
    #[serde(rename = "id")]
    pub request_id: String,
    /// The output, its finish reason and the parsed answer travel in the details block.
    #[serde(skip)]
    pub text: String,
    #[serde(skip)]
    pub finish: String,
    #[serde(skip)]
    pub parsed: Value,
    /// The key of its reference, if any.
    #[serde(rename = "r", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// (name, value) pairs, serialized as one object in their order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filters(pub Vec<(String, String)>);

impl Filters {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Filters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Browser {
    pub samples: Vec<BrowserSample>,
    /// Request id -> prompt text.
    pub prompts: Prompts,
    /// Reference key -> the reference's fields.
    pub references: BTreeMap<String, Value>,
    /// What the group column is called ("regime" for CREG).
    pub group_name: String,
    /// What the category column and filter are called (empty: "category").
    pub category_name: String,
}

/// The data blocks of the page, gzip-compressed and base64-encoded: the index the
/// browser lists and filters (inflated after the first paint), and what a sample's
/// detail shows (inflated when the first sample is opened).
pub struct Encoded {
    pub samples: String,
    pub details: String,
    pub shared: String,
}

/// A sample's listing row: its index fields and the start of its output.
#[derive(Serialize)]
struct IndexRow<'a> {
    #[serde(flatten)]
    sample: &'a BrowserSample,
    #[serde(rename = "o")]
    excerpt: String,
}

/// Characters of the output shown in the listing.
const EXCERPT: usize = 48;

/// Bytes handed to the compressor at a time. serde_json writes a few bytes at a time,
/// and every write into flate2's encoder costs a pass over its 32 KiB output buffer:
/// unbuffered, that pass was most of the time a 59,400-sample report took.
const GZIP_CHUNK: usize = 1 << 17;

fn gzip_base64(v: &impl Serialize) -> std::io::Result<String> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut w = std::io::BufWriter::with_capacity(GZIP_CHUNK, gz);
    serde_json::to_writer(&mut w, v).map_err(std::io::Error::other)?;
    let gz = w
        .into_inner()
        .map_err(std::io::IntoInnerError::into_error)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(gz.finish()?))
}

/// Prompts by request id, as the page carries them. Most lines of most prompts recur
/// (the rules, the instructions, the evidence of earlier steps, across conditions and
/// tasks), so each distinct line is stored once and each prompt as the indices of its
/// lines, which the page joins with newlines when a sample is opened. The oracle sweep's
/// 160 MB of prompts are 1,300 distinct lines and 3 M indices: compressed, a seventh of
/// the prompts' own size, in a tenth of the time, and never held whole in memory.
#[derive(Clone, Debug, Default)]
pub struct Prompts {
    lines: Vec<String>,
    line_at: HashMap<String, u32>,
    by_id: BTreeMap<String, Vec<u32>>,
}

impl Prompts {
    pub fn insert(&mut self, id: String, text: &str) {
        let at = text
            .split('\n')
            .map(|line| match self.line_at.get(line) {
                Some(&k) => k,
                None => {
                    let k = u32::try_from(self.lines.len()).expect("under 4 G distinct lines");
                    self.lines.push(line.to_string());
                    self.line_at.insert(line.to_string(), k);
                    k
                }
            })
            .collect();
        self.by_id.insert(id, at);
    }

    /// The prompt's text, as the page shows it.
    pub fn get(&self, id: &str) -> Option<String> {
        let at = self.by_id.get(id)?;
        let lines: Vec<&str> = at
            .iter()
            .map(|&k| self.lines[k as usize].as_str())
            .collect();
        Some(lines.join("\n"))
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// The shared block: the prompts' distinct lines, each prompt's line indices, and the
/// references.
#[derive(Serialize)]
struct Shared<'a> {
    lines: &'a [String],
    prompts: &'a BTreeMap<String, Vec<u32>>,
    references: &'a BTreeMap<String, Value>,
}

impl Browser {
    pub fn encode(&self) -> std::io::Result<Encoded> {
        let index: Vec<IndexRow> = self
            .samples
            .iter()
            .map(|s| IndexRow {
                sample: s,
                excerpt: s.text.chars().take(EXCERPT).collect(),
            })
            .collect();
        let details: Vec<(&str, &str, &Value)> = self
            .samples
            .iter()
            .map(|s| (s.text.as_str(), s.finish.as_str(), &s.parsed))
            .collect();
        let shared = Shared {
            lines: &self.prompts.lines,
            prompts: &self.prompts.by_id,
            references: &self.references,
        };
        // The listing on one core, what a sample's detail shows on another.
        let (samples, rest) = std::thread::scope(|scope| {
            let samples = scope.spawn(|| gzip_base64(&index));
            let rest = gzip_base64(&details).and_then(|d| Ok((d, gzip_base64(&shared)?)));
            (samples.join(), rest)
        });
        let samples = samples.unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        let (details, shared) = rest?;
        Ok(Encoded {
            samples,
            details,
            shared,
        })
    }

    /// Adds a sample of a generic workload (the Probe diagnostic), whose journaled
    /// `scores` give the metrics (numbers and booleans) and the category (`outcome` or
    /// `category`); `sample` holds the rest (see [`BrowserSample::of`]).
    pub fn push_generic(&mut self, sample: BrowserSample, scores: &Value) {
        let mut metrics = BTreeMap::new();
        let mut category = String::new();
        if let Value::Object(o) = scores {
            for (k, v) in o {
                match v {
                    Value::Number(n) => {
                        if let Some(f) = n.as_f64() {
                            metrics.insert(k.clone(), f);
                        }
                    }
                    Value::Bool(b) => {
                        metrics.insert(k.clone(), f64::from(u8::from(*b)));
                    }
                    Value::String(s) if k == "outcome" || k == "category" => category = s.clone(),
                    _ => {}
                }
            }
        }
        self.samples.push(BrowserSample {
            category,
            metrics,
            parsed: scores.clone(),
            ..sample
        });
    }
}

impl BrowserSample {
    /// What the journal says of any sample: its model, seed, request, text and ending.
    /// Where it sits in its suite (the scenario, condition, task and step columns), its
    /// group, category, filters, metrics, reading and reference are the suite's to add.
    pub fn of(model: &str, r: &SampleRecord) -> BrowserSample {
        BrowserSample {
            model: model.to_string(),
            condition: String::new(),
            task: String::new(),
            step: 0,
            seed: r.seed,
            scenario: String::new(),
            group: String::new(),
            category: String::new(),
            filters: Filters::default(),
            why: None,
            metrics: BTreeMap::new(),
            request_id: r.request_id.clone(),
            text: r.text.clone(),
            finish: finish_name(r.finish_reason),
            parsed: Value::Null,
            reference: None,
        }
    }
}

pub fn finish_name(f: FinishReason) -> String {
    serde_json::to_value(f)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| format!("{f:?}").to_lowercase())
}

impl Browser {
    /// Adds the prompts, given as (request id, text), that some sample answers.
    pub fn add_prompts(&mut self, prompts: impl IntoIterator<Item = (String, String)>) {
        let wanted: std::collections::HashSet<&str> =
            self.samples.iter().map(|x| x.request_id.as_str()).collect();
        for (id, text) in prompts {
            if wanted.contains(id.as_str()) {
                self.prompts.insert(id, &text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_travel_as_distinct_lines_and_come_back_whole() {
        let texts = [
            ("a", "rules\nevidence 1\nquestion\n"),
            ("b", "rules\nevidence 1\nevidence 2\nquestion\n"),
            ("c", ""),
            ("d", "one line, no newline"),
        ];
        let mut prompts = Prompts::default();
        for (id, text) in texts {
            prompts.insert(id.to_string(), text);
        }
        let references = BTreeMap::new();
        let shared = serde_json::to_value(Shared {
            lines: &prompts.lines,
            prompts: &prompts.by_id,
            references: &references,
        })
        .unwrap();
        let lines = shared["lines"].as_array().unwrap();
        assert_eq!(lines.len(), 6, "{lines:?}");
        for (id, text) in texts {
            assert_eq!(prompts.get(id).unwrap(), text);
            // As the page joins them.
            let back: Vec<&str> = shared["prompts"][id]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| lines[k.as_u64().unwrap() as usize].as_str().unwrap())
                .collect();
            assert_eq!(back.join("\n"), text, "{id}");
        }
        assert_eq!(prompts.len(), 4);
    }
}
