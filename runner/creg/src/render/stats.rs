//! Mean body length per condition over the belief prefixes, next to the published
//! figures (see the module docs of `render` for what is averaged).

use crate::record::Scenario;
use crate::render::{Condition, Renderer, Task};
use std::fmt::Write;

#[derive(Clone, Debug)]
pub struct LengthRow {
    pub condition: Condition,
    pub prefixes: usize,
    pub mean_chars: f64,
    /// Characters of the condition's legend, part of every body.
    pub legend_chars: usize,
    /// Mean length over full_graph's mean length.
    pub ratio: f64,
}

impl LengthRow {
    /// Relative deviation of the mean from the published mean.
    pub fn deviation(&self) -> f64 {
        self.mean_chars / self.condition.published_mean_chars() - 1.0
    }

    pub fn ratio_error(&self) -> f64 {
        self.ratio - self.condition.published_ratio()
    }
}

/// One row per condition, in the published order.
pub fn body_lengths(r: &Renderer, suite: &[Scenario]) -> Vec<LengthRow> {
    let mut rows: Vec<LengthRow> = Condition::ALL
        .into_iter()
        .map(|c| {
            let (mut chars, mut prefixes) = (0usize, 0usize);
            let mut body = String::new();
            for s in suite {
                let layout = r.layout(s, c);
                for step in Task::Belief.steps(s.observations.len()) {
                    body.clear();
                    layout.render_into(step, &mut body);
                    chars += body.chars().count();
                    prefixes += 1;
                }
            }
            LengthRow {
                condition: c,
                prefixes,
                mean_chars: chars as f64 / prefixes.max(1) as f64,
                legend_chars: r.legend(c).chars().count(),
                ratio: 0.0,
            }
        })
        .collect();
    let full = rows
        .iter()
        .find(|r| r.condition == Condition::FullGraph)
        .map_or(f64::NAN, |r| r.mean_chars);
    for row in &mut rows {
        row.ratio = row.mean_chars / full;
    }
    rows
}

pub fn table(rows: &[LengthRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:>8} {:>8} {:>8} {:>10} {:>7} {:>7} {:>10} {:>7}",
        "condition", "prefixes", "legend", "mean", "published", "dev", "ratio", "published", "diff"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<24} {:>8} {:>8} {:>8.1} {:>10.0} {:>+6.2}% {:>7.3} {:>10.3} {:>+7.3}",
            r.condition.name(),
            r.prefixes,
            r.legend_chars,
            r.mean_chars,
            r.condition.published_mean_chars(),
            100.0 * r.deviation(),
            r.ratio,
            r.condition.published_ratio(),
            r.ratio_error(),
        );
    }
    out
}

/// Whole-prompt lengths of one task over every condition: what a model's context has
/// to hold.
#[derive(Clone, Debug)]
pub struct PromptRow {
    pub task: Task,
    pub prompts: usize,
    pub mean_chars: f64,
    pub max_chars: usize,
}

pub fn prompt_lengths(r: &Renderer, suite: &[Scenario]) -> Vec<PromptRow> {
    Task::ALL
        .into_iter()
        .map(|task| {
            let (mut total, mut max, mut prompts) = (0usize, 0usize, 0usize);
            for s in suite {
                for c in Condition::ALL {
                    r.prompts(s, c, task, &mut |p| {
                        let n = p.text.chars().count();
                        total += n;
                        max = max.max(n);
                        prompts += 1;
                    });
                }
            }
            PromptRow {
                task,
                prompts,
                mean_chars: total as f64 / prompts.max(1) as f64,
                max_chars: max,
            }
        })
        .collect()
}

pub fn prompt_table(rows: &[PromptRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<14} {:>8} {:>10} {:>10}",
        "task", "prompts", "mean", "max"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<14} {:>8} {:>10.1} {:>10}",
            r.task.name(),
            r.prompts,
            r.mean_chars,
            r.max_chars
        );
    }
    out
}
