//! The machine-readable normative specification (`normative_spec.json`).
//!
//! The file is embedded in the binary; its SHA-256 goes into every record, so a change
//! to any rule, even in its prose, changes the identity of the suite.

use crate::record::{ActionType, Distribution, ObjectId, ObservationPredicate, RelationPredicate};
use runner_engine::digest::sha256_hex;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The bytes of the frozen specification.
pub const NORMATIVE_SPEC_JSON: &str = include_str!("../data/normative_spec.json");

#[derive(Clone, Debug, Deserialize)]
pub struct Target {
    pub entity_id: ObjectId,
    pub attribute: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Applicability {
    pub transfer_predicate: ObservationPredicate,
    pub transfer_relation: RelationPredicate,
    pub transfer_relation_confidence: f64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ReferenceRule {
    pub rule: String,
    pub action: ActionType,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ActionRules {
    pub choices: Vec<ActionType>,
    pub reference: Vec<ReferenceRule>,
    pub admissible: BTreeMap<ActionType, Vec<ActionType>>,
    pub inadmissible: Vec<ActionType>,
    #[serde(rename = "unsafe")]
    pub unsafe_actions: Vec<ActionType>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct RegimeRule {
    pub steps: usize,
    pub constraint: String,
}

/// The parts of the specification that code consumes; the prose rules are kept in the
/// file for readers and hashed with it.
#[derive(Clone, Debug, Deserialize)]
pub struct NormativeSpec {
    pub reference_model: String,
    pub suite_version: String,
    pub target: Target,
    pub prior: Distribution,
    pub tie_tolerance: f64,
    pub distribution_decimals: i32,
    pub applicability: Applicability,
    pub actions: ActionRules,
    pub regimes: BTreeMap<String, RegimeRule>,
}

impl NormativeSpec {
    /// The embedded specification.
    pub fn frozen() -> &'static NormativeSpec {
        static SPEC: OnceLock<NormativeSpec> = OnceLock::new();
        SPEC.get_or_init(|| {
            serde_json::from_str(NORMATIVE_SPEC_JSON)
                .expect("the embedded normative_spec.json is valid (checked by a test)")
        })
    }

    /// SHA-256 of the embedded specification's bytes.
    pub fn frozen_sha256() -> &'static str {
        static SHA: OnceLock<String> = OnceLock::new();
        SHA.get_or_init(|| sha256_hex(NORMATIVE_SPEC_JSON.as_bytes()))
    }

    /// Rounds a probability to the published number of decimals.
    pub fn round_probability(&self, p: f64) -> f64 {
        let scale = 10f64.powi(self.distribution_decimals);
        (p * scale).round() / scale
    }

    /// The name of the rule that picks `action` as the reference action.
    pub fn reference_rule(&self, action: ActionType) -> Option<&str> {
        self.actions
            .reference
            .iter()
            .find(|r| r.action == action)
            .map(|r| r.rule.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Regime;

    #[test]
    fn embedded_spec_parses_and_covers_every_regime_and_action() {
        let spec = NormativeSpec::frozen();
        assert_eq!(spec.reference_model, "controlled-binary-bayes-v1");
        assert_eq!(spec.tie_tolerance, 1e-12);
        assert_eq!(spec.prior.anomalous + spec.prior.normal, 1.0);
        for regime in Regime::ALL {
            assert!(spec.regimes.contains_key(regime.name()), "{regime} missing");
        }
        for choice in &spec.actions.choices {
            let admissible = &spec.actions.admissible[choice];
            assert!(
                admissible.contains(choice),
                "{choice:?} not admissible for itself"
            );
            assert!(spec.reference_rule(*choice).is_some());
        }
        assert_eq!(
            spec.actions.unsafe_actions,
            vec![ActionType::Shutdown, ActionType::Actuate]
        );
    }

    #[test]
    fn rounding_keeps_the_published_four_decimals() {
        let spec = NormativeSpec::frozen();
        assert_eq!(spec.round_probability(0.551_549_9), 0.5515);
        assert_eq!(spec.round_probability(0.978_36), 0.9784);
    }
}
