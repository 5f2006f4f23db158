//! What a Probe report knows of each question beyond the journal's item id: the item's
//! design facets (hop, domain, axis, ...), the question's kind and its reference. The
//! run builds it from its Probe set and hands it over as plain data; here it becomes the
//! sample browser's filters and the links from the breakdown tables to their samples.

use serde_json::Value;
use std::collections::HashMap;

/// Facet names (sample-browser filters). None may be one of the browser's fixed
/// filters (model, condition, task, regime, seed, category, metric, outcome, scenario).
pub const QUESTION: &str = "question";
pub const HOP: &str = "hop";
pub const DOMAIN: &str = "domain";
pub const AXIS: &str = "axis";
pub const CONTRADICTED: &str = "contradicted";
pub const DENSITY: &str = "density";
pub const CONFIDENCE: &str = "confidence";
/// Whether the question's gold is a value or `unknown`.
pub const GOLD: &str = "gold";
/// A point-in-time item's event history (`double_update`, ...).
pub const HISTORY: &str = "history";

/// Question kinds (the `question` facet).
pub const PRE: &str = "pre";
pub const POST: &str = "post";
pub const FOLLOWUP: &str = "followup";
pub const POINT_IN_TIME: &str = "point-in-time";

/// One question: its facets in display order, and its reference (gold answer).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuestionFacts {
    pub facets: Vec<(String, String)>,
    pub reference: Value,
}

/// The facts of every question of a Probe set, keyed by (item id, journal task).
#[derive(Clone, Debug, Default)]
pub struct ProbeFacts {
    by_question: HashMap<(String, String), QuestionFacts>,
}

impl ProbeFacts {
    pub fn insert(&mut self, item: &str, task: &str, facts: QuestionFacts) {
        self.by_question
            .insert((item.to_string(), task.to_string()), facts);
    }

    pub fn get(&self, item: &str, task: &str) -> Option<&QuestionFacts> {
        self.by_question.get(&(item.to_string(), task.to_string()))
    }

    pub fn len(&self) -> usize {
        self.by_question.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_question.is_empty()
    }
}

/// The facet a core breakdown of the scores JSON groups by (`by/<name>/<cell>`).
fn breakdown_facet(name: &str) -> Option<&'static str> {
    Some(match name {
        "hop_depth" => HOP,
        "domain" => DOMAIN,
        "axis" => AXIS,
        "contradicted" => CONTRADICTED,
        "density" => DENSITY,
        "confidence" => CONFIDENCE,
        "gold_post_kind" => GOLD,
        _ => return None,
    })
}

/// A core breakdown's cell as facet filters: `hop_x_axis` / `1 update` gives hop 1 and
/// axis update.
fn core_cell(name: &str, cell: &str) -> Option<Vec<(&'static str, String)>> {
    if let Some(other) = name.strip_prefix("hop_x_") {
        let (hop, value) = cell.split_once(' ')?;
        return Some(vec![
            (HOP, hop.to_string()),
            (breakdown_facet(other)?, value.to_string()),
        ]);
    }
    Some(vec![(breakdown_facet(name)?, cell.to_string())])
}

/// The sample-browser filters (beyond the system) behind the figure at `path` of the
/// scores JSON (`/systems/0/probe/by/hop_depth/1`), where the figure is a breakdown
/// cell; `None` for any other figure.
pub fn cell_filters(path: &str) -> Option<Vec<(&'static str, String)>> {
    let parts: Vec<&str> = path.split('/').collect();
    let tail = |n: usize| parts.get(parts.len().checked_sub(n)?..);
    if let Some(["probe", "by" | "propagation", name, cell]) = tail(4) {
        let mut f = vec![(QUESTION, POST.to_string())];
        f.extend(core_cell(name, cell)?);
        return Some(f);
    }
    match tail(3)? {
        ["probe", "axis_acc_by", cell] => {
            let (contradicted, axis) = cell.split_once(' ')?;
            Some(vec![
                (QUESTION, FOLLOWUP.to_string()),
                (CONTRADICTED, contradicted.to_string()),
                (AXIS, axis.to_string()),
            ])
        }
        ["pit", "by_label", label] => Some(vec![
            (QUESTION, POINT_IN_TIME.to_string()),
            ("task", label.to_string()),
        ]),
        ["pit", "by_scenario_label", cell] => {
            let (history, label) = cell.split_once(' ')?;
            Some(vec![
                (QUESTION, POINT_IN_TIME.to_string()),
                (HISTORY, history.to_string()),
                ("task", label.to_string()),
            ])
        }
        ["pit", "by_domain", d] => Some(vec![
            (QUESTION, POINT_IN_TIME.to_string()),
            (DOMAIN, d.to_string()),
        ]),
        ["pit", "by_density", d] => Some(vec![
            (QUESTION, POINT_IN_TIME.to_string()),
            (DENSITY, d.to_string()),
        ]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &[(&'static str, &str)]) -> Option<Vec<(&'static str, String)>> {
        Some(v.iter().map(|(k, v)| (*k, v.to_string())).collect())
    }

    #[test]
    fn breakdown_cells_become_facet_filters() {
        assert_eq!(
            cell_filters("/systems/0/probe/by/hop_depth/3"),
            f(&[(QUESTION, POST), (HOP, "3")])
        );
        assert_eq!(
            cell_filters("/systems/1/probe/by/hop_x_domain/2 residence"),
            f(&[(QUESTION, POST), (HOP, "2"), (DOMAIN, "residence")])
        );
        assert_eq!(
            cell_filters("/systems/0/probe/axis_acc_by/derived correction"),
            f(&[
                (QUESTION, FOLLOWUP),
                (CONTRADICTED, "derived"),
                (AXIS, "correction")
            ])
        );
        assert_eq!(
            cell_filters("/systems/0/pit/by_scenario_label/double_update before_any_fact"),
            f(&[
                (QUESTION, POINT_IN_TIME),
                (HISTORY, "double_update"),
                ("task", "before_any_fact")
            ])
        );
    }

    #[test]
    fn other_figures_have_no_filters() {
        assert_eq!(cell_filters("/systems/0/probe/post_acc"), None);
        assert_eq!(
            cell_filters("/systems/0/probe/by/asserted_hop1/withdrawal"),
            None
        );
        assert_eq!(
            cell_filters("/systems/0/probe/by/hop_x_axis/malformed"),
            None
        );
        assert_eq!(cell_filters("by"), None);
    }
}
