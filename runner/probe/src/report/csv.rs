//! `scores.csv` of a Probe run: one row per figure, with its machine keys and its plain
//! name. Here, beside the report's wording, rather than with the scores: the scores do
//! not know how the report names them.

use crate::report::words::csv_label;
use crate::score::{PitReport, ProbeReport, RunReport};
use runner_core::stats::bootstrap::Estimate;

impl RunReport {
    /// `scores.csv`: one row per figure, `system,set,table,cell,n,mean,lo,hi,label` (n
    /// and the interval empty where a figure has none; `set`, `table` and `cell` are
    /// machine keys, `label` the figure's plain name).
    pub fn csv(&self) -> String {
        let mut rows = CsvRows(Vec::new());
        for sys in &self.systems {
            if let Some(p) = &sys.probe {
                rows.core(&sys.system, p);
            }
            if let Some(p) = &sys.pit {
                rows.pit(&sys.system, p);
            }
        }
        let mut out = String::from("system,set,table,cell,n,mean,lo,hi,label\n");
        for row in rows.0 {
            let label = csv_label(&row[1], &row[2], &row[3]);
            let fields: Vec<String> = row
                .iter()
                .chain(std::iter::once(&label))
                .map(|f| csv_field(f))
                .collect();
            out.push_str(&fields.join(","));
            out.push('\n');
        }
        out
    }
}

/// The rows of `scores.csv`, unquoted.
struct CsvRows(Vec<[String; 8]>);

impl CsvRows {
    /// A figure with its interval.
    fn est(&mut self, system: &str, set: &str, table: &str, cell: &str, e: &Estimate) {
        self.0.push([
            system.to_string(),
            set.to_string(),
            table.to_string(),
            cell.to_string(),
            e.clusters.to_string(),
            e.mean.to_string(),
            e.lo.to_string(),
            e.hi.to_string(),
        ]);
    }

    /// A figure without n or interval.
    fn val(&mut self, system: &str, set: &str, table: &str, cell: &str, v: f64) {
        self.0.push([
            system.to_string(),
            set.to_string(),
            table.to_string(),
            cell.to_string(),
            String::new(),
            v.to_string(),
            String::new(),
            String::new(),
        ]);
    }

    /// A system's core figures: headline metrics, post outcomes, then every breakdown.
    fn core(&mut self, system: &str, p: &ProbeReport) {
        let headline = [
            ("pre_acc", &p.pre_acc),
            ("post_acc", &p.post_acc),
            ("post_em", &p.post_em),
            ("post_acc_given_pre", &p.post_acc_given_pre),
            ("stale_rate", &p.stale_rate),
        ];
        for (cell, e) in headline {
            if let Some(e) = e {
                self.est(system, "probe", "metric", cell, e);
            }
        }
        let values = [
            ("post_acc_majority", p.post_acc_majority),
            ("abstention_recall", p.abstention.recall),
            ("abstention_precision", p.abstention.precision),
            ("abstention_f1", p.abstention.f1),
            ("axis_acc", p.axis_acc),
        ];
        for (cell, v) in values {
            if let Some(v) = v {
                self.val(system, "probe", "metric", cell, v);
            }
        }
        for (o, n) in &p.outcomes {
            self.val(system, "probe", "post_outcome", o.as_str(), *n as f64);
        }
        for (table, cells) in &p.by {
            for (cell, e) in cells {
                self.est(system, "probe", table, cell, e);
            }
        }
    }

    /// A system's PIT figures: accuracy by label and by scenario x label, then the leaks.
    fn pit(&mut self, system: &str, p: &PitReport) {
        for (cell, e) in &p.by_label {
            self.est(system, "pit", "label", cell, e);
        }
        for (cell, e) in &p.by_scenario_label {
            self.est(system, "pit", "scenario_label", cell, e);
        }
        let values = [
            ("retracted_leak", p.retracted_leak),
            ("current_state_leak", p.current_state_leak),
            ("item_all_correct", p.item_all_correct),
        ];
        for (cell, v) in values {
            if let Some(v) = v {
                self.val(system, "pit", "metric", cell, v);
            }
        }
    }
}

/// A CSV field, quoted when it holds a separator, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
