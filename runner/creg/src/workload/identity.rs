//! What defines a CREG run besides the model, as its manifest records it, and the way
//! back: the plan of a journaled run, read out of its manifest to rescore it.

use crate::plan::{parse_conditions, parse_tasks, PlanSpec};
use crate::render::manifest::{templates_sha256, PROMPTS_VERSION};
use crate::spec::NormativeSpec;
use runner_core::run::manifest::{
    field, optional_usize, seeds_field, shard_field, str_field, Decoding, IdentityError,
};
use serde_json::{json, Value};

use crate::workload::SUITE_NAME;

#[derive(Clone, Debug, PartialEq)]
pub struct CregIdentity {
    /// SHA-256 of the suite file's bytes (request ids are keyed on it).
    pub suite_sha256: String,
    pub spec: PlanSpec,
    pub decoding: Decoding,
}

impl CregIdentity {
    /// The manifest's `identity` (less the model and the runner's version, which the
    /// run adds). The specification and template hashes are this build's.
    pub fn to_json(&self) -> Value {
        json!({
            "suite": {
                "name": SUITE_NAME,
                "sha256": self.suite_sha256,
                "spec_sha256": NormativeSpec::frozen_sha256(),
            },
            "prompts": {"version": PROMPTS_VERSION, "templates_sha256": templates_sha256()},
            "plan": {
                "conditions": self.spec.conditions.iter().map(|c| c.name()).collect::<Vec<_>>(),
                "tasks": self.spec.tasks.iter().map(|t| t.name()).collect::<Vec<_>>(),
                "seeds": self.spec.seeds,
                "limit_per_regime": self.spec.limit_per_regime,
            },
            "shard": self.spec.shard.map(|s| s.to_string()),
            "decoding": self.decoding.to_json(),
        })
    }

    /// The inverse of [`CregIdentity::to_json`].
    pub fn from_json(identity: &Value) -> Result<CregIdentity, IdentityError> {
        let name = str_field(identity, "/suite/name")?;
        if name != SUITE_NAME {
            return Err(IdentityError::new(
                "/suite/name",
                format!("{name:?} is not {SUITE_NAME}"),
            ));
        }
        let names = |pointer: &str| -> Result<Vec<String>, IdentityError> {
            let bad = || IdentityError::new(pointer, "expected a list of names");
            field(identity, pointer)?
                .as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|v| v.as_str().map(String::from).ok_or_else(bad))
                .collect()
        };
        let conditions = parse_conditions(&names("/plan/conditions")?)
            .map_err(|e| IdentityError::new("/plan/conditions", e.to_string()))?;
        let tasks = parse_tasks(&names("/plan/tasks")?)
            .map_err(|e| IdentityError::new("/plan/tasks", e.to_string()))?;
        Ok(CregIdentity {
            suite_sha256: str_field(identity, "/suite/sha256")?.to_string(),
            spec: PlanSpec {
                conditions,
                tasks,
                seeds: seeds_field(identity, "/plan/seeds")?,
                limit_per_regime: optional_usize(identity, "/plan/limit_per_regime")?,
                shard: shard_field(identity)?,
            },
            decoding: Decoding::from_identity(identity)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Shard;
    use crate::render::{Condition, Task};
    use runner_engine::Sampling;

    fn identity(shard: Option<Shard>, limit: Option<usize>, sampling: Sampling) -> CregIdentity {
        CregIdentity {
            suite_sha256: "ab".repeat(32),
            spec: PlanSpec {
                conditions: vec![Condition::ALL[3], Condition::ALL[0]],
                tasks: vec![Task::Belief, Task::Action],
                seeds: vec![44, 42],
                limit_per_regime: limit,
                shard,
            },
            decoding: Decoding {
                sampling,
                max_new_tokens: 512,
            },
        }
    }

    #[test]
    fn an_identity_reads_back_from_its_json_as_it_was() {
        for id in [
            identity(None, None, runner_core::protocol::SAMPLING),
            identity(
                Some(Shard { index: 2, count: 4 }),
                Some(3),
                Sampling::Greedy,
            ),
        ] {
            let text = serde_json::to_string(&id.to_json()).unwrap();
            let back = CregIdentity::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(back, id);
        }
    }

    #[test]
    fn null_fields_may_be_left_out() {
        // A merged run's manifest has no shard; the identity hash reads null as absent.
        let id = identity(None, None, runner_core::protocol::SAMPLING);
        let mut v = id.to_json();
        v.as_object_mut().unwrap().remove("shard");
        v["plan"]
            .as_object_mut()
            .unwrap()
            .remove("limit_per_regime");
        assert_eq!(CregIdentity::from_json(&v).unwrap(), id);
    }

    #[test]
    fn a_missing_or_wrong_field_is_named() {
        let mut v = identity(None, None, Sampling::Greedy).to_json();
        v["plan"]["seeds"] = json!(["42"]);
        let e = CregIdentity::from_json(&v).unwrap_err();
        assert_eq!(e.field, "/plan/seeds");
        v["plan"].as_object_mut().unwrap().remove("seeds");
        assert_eq!(
            CregIdentity::from_json(&v).unwrap_err().to_string(),
            "field `/plan/seeds`: missing"
        );
        v["suite"]["name"] = json!("probe");
        assert_eq!(
            CregIdentity::from_json(&v).unwrap_err().field,
            "/suite/name"
        );
    }
}
