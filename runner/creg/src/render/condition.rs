//! The nine representation conditions: four principal serializations and five
//! ablations. Every condition carries the same facts except what its ablation removes.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    CanonicalJson,
    StructuredList,
    GraphWithoutRelations,
    FullGraph,
    FlatEdgeRemoved,
    NoProvenance,
    NoTimestamps,
    NoConfidence,
    ShuffledFullGraph,
}

/// How a condition is serialized; the graph ablations share one serializer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    CanonicalJson,
    StructuredList,
    Graph,
    Flat,
}

/// A kind of fact an ablation deletes. Legend lines carry the same tags, so a field's
/// explanation disappears together with the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Content {
    /// The semantic relations between entities (adjacent_to, measures).
    Relations,
    /// Which agent reported which evidence (the reported edges).
    Provenance,
    /// The source-reliability field of the agents.
    Reliability,
    /// Event timestamps and arrival times (state epochs stay).
    Timestamps,
    /// The per-report confidence (relation confidence stays).
    Confidence,
}

impl Content {
    pub const ALL: [Content; 5] = [
        Content::Relations,
        Content::Provenance,
        Content::Reliability,
        Content::Timestamps,
        Content::Confidence,
    ];

    /// The tag used in legend templates.
    pub fn tag(self) -> &'static str {
        match self {
            Content::Relations => "relations",
            Content::Provenance => "provenance",
            Content::Reliability => "reliability",
            Content::Timestamps => "timestamps",
            Content::Confidence => "confidence",
        }
    }
}

impl Condition {
    /// In the published table's order: principal conditions, then ablations.
    pub const ALL: [Condition; 9] = [
        Condition::CanonicalJson,
        Condition::StructuredList,
        Condition::GraphWithoutRelations,
        Condition::FullGraph,
        Condition::FlatEdgeRemoved,
        Condition::NoProvenance,
        Condition::NoTimestamps,
        Condition::NoConfidence,
        Condition::ShuffledFullGraph,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Condition::CanonicalJson => "canonical_json",
            Condition::StructuredList => "structured_list",
            Condition::GraphWithoutRelations => "graph_without_relations",
            Condition::FullGraph => "full_graph",
            Condition::FlatEdgeRemoved => "flat_edge_removed",
            Condition::NoProvenance => "no_provenance",
            Condition::NoTimestamps => "no_timestamps",
            Condition::NoConfidence => "no_confidence",
            Condition::ShuffledFullGraph => "shuffled_full_graph",
        }
    }

    /// The position in [`Condition::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn is_principal(self) -> bool {
        matches!(
            self,
            Condition::CanonicalJson
                | Condition::StructuredList
                | Condition::GraphWithoutRelations
                | Condition::FullGraph
        )
    }

    pub fn family(self) -> Family {
        match self {
            Condition::CanonicalJson => Family::CanonicalJson,
            Condition::StructuredList => Family::StructuredList,
            Condition::FlatEdgeRemoved => Family::Flat,
            Condition::GraphWithoutRelations
            | Condition::FullGraph
            | Condition::NoProvenance
            | Condition::NoTimestamps
            | Condition::NoConfidence
            | Condition::ShuffledFullGraph => Family::Graph,
        }
    }

    /// Whether this condition shows `content`. No-provenance is a joint manipulation
    /// (reported edges and reliability), as published.
    pub fn keeps(self, content: Content) -> bool {
        !matches!(
            (self, content),
            (Condition::GraphWithoutRelations, Content::Relations)
                | (Condition::NoProvenance, Content::Provenance)
                | (Condition::NoProvenance, Content::Reliability)
                | (Condition::NoTimestamps, Content::Timestamps)
                | (Condition::NoConfidence, Content::Confidence)
        )
    }

    /// The published mean body length in characters (evaluation-v1.0 acceptance table).
    pub fn published_mean_chars(self) -> f64 {
        match self {
            Condition::CanonicalJson => 5284.0,
            Condition::StructuredList => 5651.0,
            Condition::GraphWithoutRelations => 6058.0,
            Condition::FullGraph => 6271.0,
            Condition::FlatEdgeRemoved => 6298.0,
            Condition::NoProvenance => 5834.0,
            Condition::NoTimestamps => 6053.0,
            Condition::NoConfidence => 6210.0,
            Condition::ShuffledFullGraph => 6271.0,
        }
    }

    /// The published ratio of the mean body length to full_graph's.
    pub fn published_ratio(self) -> f64 {
        match self {
            Condition::CanonicalJson => 0.843,
            Condition::StructuredList => 0.901,
            Condition::GraphWithoutRelations => 0.966,
            Condition::FullGraph => 1.000,
            Condition::FlatEdgeRemoved => 1.004,
            Condition::NoProvenance => 0.930,
            Condition::NoTimestamps => 0.965,
            Condition::NoConfidence => 0.990,
            Condition::ShuffledFullGraph => 1.000,
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown condition `{0}` (expected one of: canonical_json, structured_list, graph_without_relations, full_graph, flat_edge_removed, no_provenance, no_timestamps, no_confidence, shuffled_full_graph)")]
pub struct UnknownCondition(pub String);

impl FromStr for Condition {
    type Err = UnknownCondition;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Condition::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownCondition(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for c in Condition::ALL {
            assert_eq!(c.name().parse::<Condition>().unwrap(), c);
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
        }
        assert!("graph".parse::<Condition>().is_err());
        for (i, c) in Condition::ALL.into_iter().enumerate() {
            assert_eq!(c.index(), i);
        }
    }

    #[test]
    fn each_ablation_removes_only_its_content() {
        let removed = |c: Condition| Content::ALL.iter().filter(|&&x| !c.keeps(x)).count();
        assert_eq!(removed(Condition::FullGraph), 0);
        assert_eq!(removed(Condition::ShuffledFullGraph), 0);
        assert_eq!(removed(Condition::FlatEdgeRemoved), 0);
        assert_eq!(removed(Condition::NoProvenance), 2);
        assert_eq!(removed(Condition::NoConfidence), 1);
        assert_eq!(
            Condition::ALL.iter().filter(|c| c.is_principal()).count(),
            4
        );
    }
}
