//! Where a CREG request sits in the plan, as its facets say in the journal: the
//! scenario, the representation condition, the task and the arrival step, under the
//! keys and in the order journals have carried them since the first run.

use crate::render::question::Question;
use runner_core::facets::Facets;

const SCENARIO: &str = "scenario";
const CONDITION: &str = "condition";
const TASK: &str = "task";
const STEP: &str = "step";

/// The question a journaled (task, step) asks.
pub fn question(task: &str, step: usize) -> Option<Question> {
    Some(match task {
        "belief" => Question::Belief { step },
        "contradiction" => Question::Contradiction,
        "action" => Question::Action,
        "explanation" => Question::Explanation,
        _ => return None,
    })
}

/// A request's place, borrowed from its facets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Place<'a> {
    pub scenario: &'a str,
    pub condition: &'a str,
    pub task: &'a str,
    pub step: usize,
}

impl<'a> Place<'a> {
    /// The place a record's facets give, or which facet is missing or of the wrong kind.
    pub fn of(f: &'a Facets) -> Result<Place<'a>, String> {
        let place = || -> Result<Place<'a>, runner_core::facets::FacetError> {
            Ok(Place {
                scenario: f.text(SCENARIO)?,
                condition: f.text(CONDITION)?,
                task: f.text(TASK)?,
                step: f.count(STEP)?,
            })
        };
        place().map_err(|e| format!("not a CREG sample: {e}"))
    }

    pub fn facets(&self) -> Facets {
        Facets::new()
            .with(SCENARIO, self.scenario)
            .with(CONDITION, self.condition)
            .with(TASK, self.task)
            .with(STEP, self.step)
    }

    /// The question the place asks, if its task is one of CREG's.
    pub fn question(&self) -> Result<Question, String> {
        question(self.task, self.step).ok_or_else(|| format!("unknown task {:?}", self.task))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_reads_back_from_its_facets_and_a_probe_record_is_refused() {
        let place = Place {
            scenario: "s-1",
            condition: "full_graph",
            task: "belief",
            step: 2,
        };
        let facets = place.facets();
        assert_eq!(Place::of(&facets), Ok(place));
        assert_eq!(place.question(), Ok(Question::Belief { step: 2 }));
        let probe = Facets::new().with("item", "emp-1").with("phase", "pre");
        assert_eq!(
            Place::of(&probe).unwrap_err(),
            "not a CREG sample: the record has no `scenario`"
        );
    }
}
