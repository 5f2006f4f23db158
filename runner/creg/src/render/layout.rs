//! A body as fixed text and sections of records, each record tagged with the arrival
//! step from which it is visible. A scenario is laid out once per condition and every
//! prefix is cut from that layout, so a prefix can only differ from the next one by
//! the records that arrive in between.

use runner_engine::digest::sha256_hex;

/// One record of a section: its text and the first step at which it may be shown
/// (0: visible from the prior on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub step: usize,
    pub text: String,
}

/// A run of records: `open`, the visible records joined by `sep`, then `close`; or
/// `empty` alone when no record is visible.
#[derive(Clone, Debug)]
pub struct Section {
    pub open: String,
    pub sep: &'static str,
    pub close: String,
    pub empty: String,
    pub items: Vec<Item>,
}

#[derive(Clone, Debug)]
enum Part {
    Text(String),
    Section(Section),
}

#[derive(Clone, Debug, Default)]
pub struct Layout {
    parts: Vec<Part>,
}

impl Layout {
    pub fn text(&mut self, s: impl Into<String>) {
        self.parts.push(Part::Text(s.into()));
    }

    pub fn section(&mut self, s: Section) {
        self.parts.push(Part::Section(s));
    }

    /// Appends the body at `step` to `out`.
    pub fn render_into(&self, step: usize, out: &mut String) {
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Section(s) => {
                    let mut visible = s.items.iter().filter(|i| i.step <= step).peekable();
                    if visible.peek().is_none() {
                        out.push_str(&s.empty);
                        continue;
                    }
                    out.push_str(&s.open);
                    for (n, item) in visible.enumerate() {
                        if n > 0 {
                            out.push_str(s.sep);
                        }
                        out.push_str(&item.text);
                    }
                    out.push_str(&s.close);
                }
            }
        }
    }

    pub fn render(&self, step: usize) -> String {
        let mut out = String::with_capacity(8192);
        self.render_into(step, &mut out);
        out
    }

    pub fn sections(&self) -> impl Iterator<Item = &Section> {
        self.parts.iter().filter_map(|p| match p {
            Part::Section(s) => Some(s),
            Part::Text(_) => None,
        })
    }

    /// Reorders the records of every section by the SHA-256 of `key` and the record
    /// text. Keying on the text (not the position) keeps the order of two records the
    /// same in every prefix of a scenario, so later prefixes only insert records.
    pub fn shuffle(&mut self, key: &str) {
        for part in &mut self.parts {
            if let Part::Section(s) = part {
                s.items
                    .sort_by_cached_key(|i| sha256_hex(format!("{key}\n{}", i.text).as_bytes()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(usize, &str)]) -> Section {
        Section {
            open: "[".into(),
            sep: ",",
            close: "]".into(),
            empty: "[]".into(),
            items: items
                .iter()
                .map(|&(step, t)| Item {
                    step,
                    text: t.into(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_prefix_shows_only_records_arrived_by_its_step() {
        let mut l = Layout::default();
        l.text("x=");
        l.section(list(&[(0, "a"), (2, "c"), (1, "b")]));
        l.section(list(&[(3, "d")]));
        assert_eq!(l.render(0), "x=[a][]");
        assert_eq!(l.render(1), "x=[a,b][]");
        assert_eq!(l.render(3), "x=[a,c,b][d]");
    }

    #[test]
    fn shuffling_permutes_records_and_depends_on_the_key() {
        let items: Vec<(usize, String)> = (0..12).map(|i| (0, format!("r{i}"))).collect();
        let refs: Vec<(usize, &str)> = items.iter().map(|(s, t)| (*s, t.as_str())).collect();
        let mut a = Layout::default();
        a.section(list(&refs));
        let original = a.render(0);
        let mut b = a.clone();
        a.shuffle("k1");
        b.shuffle("k2");
        let (sa, sb) = (a.render(0), b.render(0));
        assert_ne!(sa, original);
        assert_ne!(sa, sb);
        let sorted = |s: &str| {
            let mut v: Vec<char> = s.chars().collect();
            v.sort_unstable();
            v
        };
        assert_eq!(sorted(&sa), sorted(&original));
    }
}
