//! What defines a Probe run besides the model, as its manifest records it, and the way
//! back: the set and plan of a journaled run, read out of its manifest to rescore it.

use crate::plan::ProbePlan;
use crate::render::PROMPT_VERSION;
use crate::set::ProbeSet;
use crate::workload::{ProbeWorkload, FAMILY};
use runner_core::run::manifest::{
    field, optional, optional_usize, seeds_field, shard_field, str_field, usize_field, Decoding,
    IdentityError,
};
use runner_core::run::RunError;
use serde_json::{json, Value};
use std::path::Path;

/// One file of the set: the hash of its bytes and how many items it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct PartIdentity {
    pub sha256: String,
    pub items: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProbeIdentity {
    /// The set's name, e.g. `probe` (generated) or `probe-v0`.
    pub name: String,
    pub generated: bool,
    pub probe: Option<PartIdentity>,
    pub pit: Option<PartIdentity>,
    pub plan: ProbePlan,
    pub decoding: Decoding,
}

impl ProbeIdentity {
    pub fn of(set: &ProbeSet, plan: &ProbePlan, decoding: Decoding) -> ProbeIdentity {
        ProbeIdentity {
            name: set.name.clone(),
            generated: set.generated,
            probe: set.core.as_ref().map(|p| PartIdentity {
                sha256: p.sha256.clone(),
                items: p.items.len(),
            }),
            pit: set.pit.as_ref().map(|p| PartIdentity {
                sha256: p.sha256.clone(),
                items: p.items.len(),
            }),
            plan: plan.clone(),
            decoding,
        }
    }

    /// The manifest's `identity` (less the model and the runner's version, which the
    /// run adds).
    pub fn to_json(&self) -> Value {
        let part = |p: &PartIdentity| json!({"sha256": p.sha256, "items": p.items});
        json!({
            "suite": {
                "name": self.name,
                "family": FAMILY,
                "generated": self.generated,
                "probe": self.probe.as_ref().map(part),
                "pit": self.pit.as_ref().map(part),
            },
            "prompts": {"version": PROMPT_VERSION},
            "plan": {
                "seeds": self.plan.seeds,
                "limit_per_domain": self.plan.limit_per_domain,
            },
            "shard": self.plan.shard.map(|s| s.to_string()),
            "decoding": self.decoding.to_json(),
        })
    }

    /// The inverse of [`ProbeIdentity::to_json`].
    pub fn from_json(identity: &Value) -> Result<ProbeIdentity, IdentityError> {
        let family = identity.pointer("/suite/family").and_then(Value::as_str);
        if family != Some(FAMILY) {
            return Err(IdentityError::new(
                "/suite/family",
                format!("not {FAMILY:?}: nor is it a Probe set"),
            ));
        }
        let part = |key: &str| -> Result<Option<PartIdentity>, IdentityError> {
            let at = format!("/suite/{key}");
            if optional(identity, &at).is_none() {
                return Ok(None);
            }
            Ok(Some(PartIdentity {
                sha256: str_field(identity, &format!("{at}/sha256"))?.to_string(),
                items: usize_field(identity, &format!("{at}/items"))?,
            }))
        };
        let generated = field(identity, "/suite/generated")?
            .as_bool()
            .ok_or_else(|| IdentityError::new("/suite/generated", "expected true or false"))?;
        Ok(ProbeIdentity {
            name: str_field(identity, "/suite/name")?.to_string(),
            generated,
            probe: part("probe")?,
            pit: part("pit")?,
            plan: ProbePlan {
                seeds: seeds_field(identity, "/plan/seeds")?,
                limit_per_domain: optional_usize(identity, "/plan/limit_per_domain")?,
                shard: shard_field(identity)?,
            },
            decoding: Decoding::from_identity(identity)?,
        })
    }
}

impl ProbeWorkload {
    /// The workload a journaled run was planned with, rebuilt from its manifest
    /// identity: the generated set, or `file` (whose hashes must be the run's). The
    /// rebuilt plan is the whole run's, whichever shard the journal holds.
    pub fn from_identity(identity: &Value, file: Option<&Path>) -> Result<ProbeWorkload, RunError> {
        let id = ProbeIdentity::from_json(identity)?;
        let mut set = match file {
            Some(p) => ProbeSet::from_file(p).map_err(|e| RunError::Input(Box::new(e)))?,
            None if id.generated => ProbeSet::generated(),
            None => {
                return Err(RunError::Setup(format!(
                    "the run used the Probe file of set {:?}, not the generated one; pass --suite-file with that file",
                    id.name
                )))
            }
        };
        let mut differences = Vec::new();
        for (key, want, have) in [
            (
                "probe",
                &id.probe,
                set.core.as_ref().map(|p| p.sha256.as_str()),
            ),
            ("pit", &id.pit, set.pit.as_ref().map(|p| p.sha256.as_str())),
        ] {
            let want = want.as_ref().map(|p| p.sha256.as_str());
            if want != have {
                differences.push(format!(
                    "{key} sha256: the run used {}, {} has {}",
                    want.unwrap_or("none"),
                    file.map_or("the generated set".to_string(), |p| p.display().to_string()),
                    have.unwrap_or("none")
                ));
            }
        }
        if !differences.is_empty() {
            return Err(RunError::Setup(format!(
                "{}; pass --suite-file with the run's Probe file",
                differences.join("; ")
            )));
        }
        set.name = id.name;
        let plan = ProbePlan {
            shard: None,
            ..id.plan
        };
        ProbeWorkload::new(set, plan, id.decoding.max_new_tokens, id.decoding.sampling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner_core::plan::Shard;
    use runner_engine::Sampling;

    #[test]
    fn an_identity_reads_back_from_its_json_as_it_was() {
        let part = |c: char, items| PartIdentity {
            sha256: c.to_string().repeat(64),
            items,
        };
        for id in [
            ProbeIdentity {
                name: "probe".into(),
                generated: true,
                probe: Some(part('a', 168)),
                pit: Some(part('b', 8)),
                plan: ProbePlan {
                    seeds: vec![42, 43, 44],
                    limit_per_domain: None,
                    shard: None,
                },
                decoding: Decoding {
                    sampling: runner_core::protocol::SAMPLING,
                    max_new_tokens: 512,
                },
            },
            ProbeIdentity {
                name: "probe-v0".into(),
                generated: false,
                probe: None,
                pit: Some(part('c', 3)),
                plan: ProbePlan {
                    seeds: vec![7],
                    limit_per_domain: Some(2),
                    shard: Some(Shard { index: 1, count: 3 }),
                },
                decoding: Decoding {
                    sampling: Sampling::Greedy,
                    max_new_tokens: 16,
                },
            },
        ] {
            let text = serde_json::to_string(&id.to_json()).unwrap();
            let back = ProbeIdentity::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(back, id);
        }
    }

    #[test]
    fn a_creg_identity_is_not_read_as_a_probe_set() {
        let e = ProbeIdentity::from_json(&json!({"suite": {"name": "creg-v1.0"}})).unwrap_err();
        assert_eq!(e.field, "/suite/family");
    }
}
