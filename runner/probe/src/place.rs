//! Where a Probe request sits, as its facets say in the journal: the item, the
//! condition (`conversation` or `point-in-time`), the phase or query label, and the
//! sessions shown or the query's index. The keys are those Probe journals have carried
//! since the first run (the item under `scenario`, the label under `task`), so that
//! every journal written before reads unchanged.

use runner_core::facets::{FacetError, Facets};

const ITEM: &str = "scenario";
const CONDITION: &str = "condition";
const LABEL: &str = "task";
const INDEX: &str = "step";

/// A request's place, borrowed from its facets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Place<'a> {
    pub item: &'a str,
    pub condition: &'a str,
    /// `pre`, `post` or `followup` for a core item; the query's label for a PIT item.
    pub label: &'a str,
    /// The sessions shown (core) or the query's index in its item (PIT).
    pub index: usize,
}

impl<'a> Place<'a> {
    /// The place a record's facets give, or which facet is missing or of the wrong kind.
    pub fn of(f: &'a Facets) -> Result<Place<'a>, String> {
        let place = || -> Result<Place<'a>, FacetError> {
            Ok(Place {
                item: f.text(ITEM)?,
                condition: f.text(CONDITION)?,
                label: f.text(LABEL)?,
                index: f.count(INDEX)?,
            })
        };
        place().map_err(|e| format!("not a Probe sample: {e}"))
    }

    pub fn facets(&self) -> Facets {
        Facets::new()
            .with(ITEM, self.item)
            .with(CONDITION, self.condition)
            .with(LABEL, self.label)
            .with(INDEX, self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_reads_back_from_its_facets_under_the_journals_keys() {
        let place = Place {
            item: "emp-d1",
            condition: "point-in-time",
            label: "as_of_first",
            index: 1,
        };
        let facets = place.facets();
        let keys: Vec<&str> = facets.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["scenario", "condition", "task", "step"]);
        assert_eq!(Place::of(&facets), Ok(place));
        let other = Facets::new().with("item", 3);
        assert_eq!(
            Place::of(&other).unwrap_err(),
            "not a Probe sample: the record has no `scenario`"
        );
    }
}
