//! The CREG record in its published shape: one JSON object per scenario.
//!
//! Field names and nesting follow the published description; enums are serialized in
//! snake_case exactly as they appear there.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(#[serde(deserialize_with = "runner_core::strict::bounded_id")] pub String);

        impl $name {
            pub fn new(s: impl Into<String>) -> Self {
                Self(s.into())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_newtype!(
    /// `evaluation-v1-<regime>-<suite seed>-<case>`.
    ScenarioId
);
id_newtype!(
    /// An observation's id, e.g. `obs-2` or `obs-distractor`.
    EvidenceId
);
id_newtype!(
    /// A source agent, e.g. `robot-1`.
    AgentId
);
id_newtype!(
    /// A physical object, e.g. `gauge-1`.
    ObjectId
);

/// The seven construction regimes, 50 scenarios each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    JustifiedRevision,
    BeliefPreservation,
    RelationAssociation,
    ContradictionOnset,
    ContradictionResolution,
    #[serde(alias = "stale_delayed", alias = "stale_or_delayed_evidence")]
    StaleDelayedEvidence,
    SourceReliability,
}

impl Regime {
    pub const ALL: [Regime; 7] = [
        Regime::JustifiedRevision,
        Regime::BeliefPreservation,
        Regime::RelationAssociation,
        Regime::ContradictionOnset,
        Regime::ContradictionResolution,
        Regime::StaleDelayedEvidence,
        Regime::SourceReliability,
    ];

    /// The snake_case name used in ids and files.
    pub fn name(self) -> &'static str {
        match self {
            Regime::JustifiedRevision => "justified_revision",
            Regime::BeliefPreservation => "belief_preservation",
            Regime::RelationAssociation => "relation_association",
            Regime::ContradictionOnset => "contradiction_onset",
            Regime::ContradictionResolution => "contradiction_resolution",
            Regime::StaleDelayedEvidence => "stale_delayed_evidence",
            Regime::SourceReliability => "source_reliability",
        }
    }
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A physical state of the scored attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Anomalous,
    Normal,
}

impl State {
    pub fn opposite(self) -> State {
        match self {
            State::Anomalous => State::Normal,
            State::Normal => State::Anomalous,
        }
    }
}

/// The categorical reference state: a physical state, or `undetermined` on a tie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceState {
    Anomalous,
    Normal,
    Undetermined,
}

impl ReferenceState {
    pub fn physical(self) -> Option<State> {
        match self {
            ReferenceState::Anomalous => Some(State::Anomalous),
            ReferenceState::Normal => Some(State::Normal),
            ReferenceState::Undetermined => None,
        }
    }
}

impl From<State> for ReferenceState {
    fn from(s: State) -> Self {
        match s {
            State::Anomalous => ReferenceState::Anomalous,
            State::Normal => ReferenceState::Normal,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    Robot,
    IotSensor,
    EdgeAi,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentMetadata {
    /// The source's track record in [0.5, 1].
    pub reliability: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    pub id: AgentId,
    pub kind: AgentKind,
    pub metadata: AgentMetadata,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectCategory {
    Gauge,
    Sensor,
    Panel,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Object {
    pub id: ObjectId,
    pub label: String,
    pub category: ObjectCategory,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationPredicate {
    AdjacentTo,
    Measures,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    pub source_id: ObjectId,
    pub target_id: ObjectId,
    pub predicate: RelationPredicate,
    pub confidence: f64,
    pub evidence_ids: Vec<EvidenceId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationPredicate {
    /// A direct report of an object's condition.
    Condition,
    /// A distractor panel's indicator.
    Indicator,
    /// A remote sensor's reading, which bears on a gauge only through `measures`.
    Reading,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationValue {
    Normal,
    Anomalous,
    Nominal,
    Unknown,
}

impl ObservationValue {
    /// The physical state this value claims, if it claims one.
    pub fn state(self) -> Option<State> {
        match self {
            ObservationValue::Normal => Some(State::Normal),
            ObservationValue::Anomalous => Some(State::Anomalous),
            ObservationValue::Nominal | ObservationValue::Unknown => None,
        }
    }
}

impl From<State> for ObservationValue {
    fn from(s: State) -> Self {
        match s {
            State::Normal => ObservationValue::Normal,
            State::Anomalous => ObservationValue::Anomalous,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObservationMetadata {
    /// When the report reached the shared belief; may be later than `timestamp`.
    pub arrival_time: String,
    pub state_epoch: u32,
    pub supersedes_evidence_ids: Vec<EvidenceId>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub id: EvidenceId,
    pub agent_id: AgentId,
    pub subject_id: ObjectId,
    pub predicate: ObservationPredicate,
    pub value: ObservationValue,
    pub confidence: f64,
    /// When the observed event happened.
    pub timestamp: String,
    pub metadata: ObservationMetadata,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    Initial,
    RelationAssociation,
    DelayedEvidence,
    StaleEvidence,
    ContradictionOnset,
    ContradictionResolution,
    Isolate,
    Update,
    Preserve,
}

impl EventType {
    pub const ALL: [EventType; 9] = [
        EventType::Initial,
        EventType::RelationAssociation,
        EventType::DelayedEvidence,
        EventType::StaleEvidence,
        EventType::ContradictionOnset,
        EventType::ContradictionResolution,
        EventType::Isolate,
        EventType::Update,
        EventType::Preserve,
    ];
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbabilityDirection {
    Reversed,
    Weakened,
    Preserved,
    Strengthened,
}

impl ProbabilityDirection {
    pub const ALL: [ProbabilityDirection; 4] = [
        ProbabilityDirection::Reversed,
        ProbabilityDirection::Weakened,
        ProbabilityDirection::Preserved,
        ProbabilityDirection::Strengthened,
    ];
}

/// A distribution over the two physical states.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    pub anomalous: f64,
    pub normal: f64,
}

impl Distribution {
    pub fn p(&self, s: State) -> f64 {
        match s {
            State::Anomalous => self.anomalous,
            State::Normal => self.normal,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReferenceBelief {
    pub entity_id: ObjectId,
    pub attribute: String,
    pub reference_state: ReferenceState,
    pub probability_direction: ProbabilityDirection,
    pub supporting_evidence: Vec<EvidenceId>,
    pub contradicting_evidence: Vec<EvidenceId>,
    pub reference_distribution: Distribution,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContradictionType {
    SameEpochValueConflict,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionStatus {
    Active,
    Resolved,
}

/// The contradiction state at one step. An active conflict lists the opposing claims;
/// a resolved one lists the claims it involved and what superseded them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContradictionRecord {
    pub contradiction_present: bool,
    #[serde(default)]
    pub contradiction_type: Option<ContradictionType>,
    #[serde(default)]
    pub involved_evidence_ids: Vec<EvidenceId>,
    pub resolution_status: ResolutionStatus,
    #[serde(default)]
    pub superseded_evidence_ids: Vec<EvidenceId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionType {
    Verify,
    Inspect,
    RequestObservation,
    Monitor,
    Ignore,
    Shutdown,
    Actuate,
}

impl ActionType {
    /// The actions a system under test may choose from.
    pub const CHOICES: [ActionType; 4] = [
        ActionType::Verify,
        ActionType::Inspect,
        ActionType::RequestObservation,
        ActionType::Monitor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ActionType::Verify => "verify",
            ActionType::Inspect => "inspect",
            ActionType::RequestObservation => "request_observation",
            ActionType::Monitor => "monitor",
            ActionType::Ignore => "ignore",
            ActionType::Shutdown => "shutdown",
            ActionType::Actuate => "actuate",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReferenceAction {
    pub action_type: ActionType,
    #[serde(default)]
    pub target_entity_id: Option<ObjectId>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepAction {
    pub reference_action: ReferenceAction,
}

/// One evidence prefix; step 0 is the prior.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryStep {
    pub step_index: usize,
    pub new_evidence_ids: Vec<EvidenceId>,
    /// Arrived claims that bear on the target and still count (not stale, not superseded).
    pub active_evidence_ids: Vec<EvidenceId>,
    #[serde(default)]
    pub stale_evidence_ids: Vec<EvidenceId>,
    #[serde(default)]
    pub superseded_evidence_ids: Vec<EvidenceId>,
    /// Arrived reports that do not bear on the target (distractor, readings routed elsewhere).
    #[serde(default)]
    pub isolated_evidence_ids: Vec<EvidenceId>,
    pub event_types: Vec<EventType>,
    pub reference_beliefs: Vec<ReferenceBelief>,
    pub contradictions: Vec<ContradictionRecord>,
    pub action: StepAction,
    #[serde(default)]
    pub expected_update: bool,
}

/// A named rule of the normative specification that produced an endpoint label.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionRule {
    pub rule: String,
    pub applies_to: Vec<ActionType>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndpointAction {
    pub reference_action: ReferenceAction,
    pub admissible_actions: Vec<ActionType>,
    pub inadmissible_actions: Vec<ActionType>,
    pub unsafe_actions: Vec<ActionType>,
    #[serde(default)]
    pub rules: Vec<ActionRule>,
}

/// The final contradiction state of the scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContradictionSummary {
    pub contradiction_present: bool,
    pub contradiction_type: Option<ContradictionType>,
    pub involved_evidence_ids: Vec<EvidenceId>,
    pub resolution_status: Option<ResolutionStatus>,
    pub superseded_evidence_ids: Vec<EvidenceId>,
    pub onset_step: Option<usize>,
    pub resolution_step: Option<usize>,
}

/// The final reference belief about the scored target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeliefSummary {
    pub entity_id: ObjectId,
    pub attribute: String,
    pub reference_state: ReferenceState,
    pub probability_direction: ProbabilityDirection,
    pub reference_distribution: Distribution,
    pub supporting_evidence: Vec<EvidenceId>,
    pub contradicting_evidence: Vec<EvidenceId>,
}

/// What became of a report by the end of the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceStatus {
    Active,
    Stale,
    Superseded,
    Isolated,
}

/// Per-evidence provenance, times and reliabilities at the endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidenceSummary {
    pub evidence_id: EvidenceId,
    pub agent_id: AgentId,
    pub agent_kind: AgentKind,
    pub source_reliability: f64,
    pub confidence: f64,
    /// a = 0.5 + (c - 0.5) r, the accuracy the likelihood uses.
    pub effective_accuracy: f64,
    pub timestamp: String,
    pub arrival_time: String,
    pub arrival_step: usize,
    pub state_epoch: u32,
    pub status: EvidenceStatus,
    /// The target entity the report bears on, after relation transfer.
    pub applies_to: Option<ObjectId>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub belief_trajectory: Vec<TrajectoryStep>,
    pub action: EndpointAction,
    pub contradictions: ContradictionSummary,
    pub beliefs: BeliefSummary,
    pub evidence: Vec<EvidenceSummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioMetadata {
    pub trajectory_regime: Regime,
    /// Absent in some published excerpts; the generator always writes it.
    #[serde(default)]
    pub case_index: Option<u32>,
    pub suite_seed: u64,
    #[serde(default)]
    pub counterfactual_pair_id: Option<String>,
    pub reference_model: String,
    #[serde(default)]
    pub normative_spec_sha256: Option<String>,
    #[serde(default)]
    pub generator_version: Option<String>,
}

/// One CREG scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub id: ScenarioId,
    pub agents: Vec<Agent>,
    pub objects: Vec<Object>,
    pub relations: Vec<Relation>,
    pub observations: Vec<Observation>,
    pub evaluation: Evaluation,
    pub metadata: ScenarioMetadata,
}

impl Scenario {
    pub fn agent(&self, id: &AgentId) -> Option<&Agent> {
        self.agents.iter().find(|a| &a.id == id)
    }

    pub fn observation(&self, id: &EvidenceId) -> Option<&Observation> {
        self.observations.iter().find(|o| &o.id == id)
    }

    /// Observations in arrival order (ties broken by id), the order the trajectory uses.
    pub fn arrival_order(&self) -> Vec<&Observation> {
        let mut obs: Vec<&Observation> = self.observations.iter().collect();
        obs.sort_by_cached_key(|o| {
            (
                parse_time(&o.metadata.arrival_time),
                o.metadata.arrival_time.clone(),
                o.id.clone(),
            )
        });
        obs
    }

    /// The scored belief at each prefix (step 0 is the prior).
    pub fn target_belief(&self, step: usize) -> Option<&ReferenceBelief> {
        self.evaluation
            .belief_trajectory
            .get(step)
            .and_then(|s| s.reference_beliefs.first())
    }
}

/// Parses an RFC 3339 time (`Z` or `+00:00`); `None` when it is not one.
pub fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(s).ok()
}
