//! The regime layouts: which reports each regime places on the timeline, with which
//! draws, and the labels its construction must come out with.

use crate::generator::*;
use AgentKind::{EdgeAi as Edge, IotSensor as Iot, Robot};
use ProbabilityDirection::*;

/// One case's draws and what its case number decides.
pub(super) struct Case<'d> {
    d: &'d Draws,
    pub(super) case: u32,
    /// The state the case's first report claims: normal on even cases.
    pub(super) x: State,
    pub(super) even: bool,
    /// How late a delayed report arrives, in seconds.
    delay: u32,
}

impl<'d> Case<'d> {
    pub(super) fn new(d: &'d Draws, case: u32) -> Self {
        Case {
            d,
            case,
            x: state_of_parity(case),
            even: case.is_multiple_of(2),
            delay: d.integer("delay", 3, 4),
        }
    }

    pub(super) fn reliability(&self, name: &str, lo: f64, hi: f64) -> f64 {
        self.d.hundredths(&format!("reliability/{name}"), lo, hi)
    }

    pub(super) fn confidence(&self, name: &str, lo: f64, hi: f64) -> f64 {
        self.d.hundredths(&format!("confidence/{name}"), lo, hi)
    }
}

/// The expected event tags of every step: the prior's, then one set per arrival.
fn events(steps: &[&[EventType]]) -> Vec<Vec<EventType>> {
    let mut all = vec![vec![Initial]];
    all.extend(steps.iter().map(|s| s.to_vec()));
    all
}

/// The action for a settled (conflict-free) state.
fn settle_action(s: State) -> ActionType {
    match s {
        State::Anomalous => ActionType::Inspect,
        State::Normal => ActionType::Monitor,
    }
}

/// A more reliable late report overturns the first one.
pub(super) fn justified_revision(k: &Case, p: &mut Plan) {
    let x = k.x;
    p.reliabilities[0] = k.reliability("robot", 0.70, 0.75);
    p.reliabilities[1] = k.reliability("iot", 0.88, 0.92);
    p.reports = vec![
        condition(Robot, x, k.confidence("a", 0.70, 0.80), 10, 0),
        condition(
            Iot,
            x.opposite(),
            k.confidence("b", 0.88, 0.95),
            20,
            k.delay,
        ),
    ];
    p.expected.events = events(&[&[Update], &[Isolate], &[Delayed, Onset, Update]]);
    p.expected.state = x.opposite();
}

/// A weaker late report contradicts the first one without overturning it.
pub(super) fn belief_preservation(k: &Case, p: &mut Plan) {
    let x = k.x;
    p.reports = vec![
        condition(Iot, x, k.confidence("a", 0.86, 0.95), 10, 0),
        condition(
            Robot,
            x.opposite(),
            k.confidence("b", 0.62, 0.72),
            20,
            k.delay,
        ),
    ];
    p.expected.events = events(&[&[Update], &[Isolate], &[Delayed, Onset, Preserve]]);
    p.expected.direction = Weakened;
}

/// A confident but unreliable report is overturned by a reliable one that a
/// confidence-only fusion would have lost to.
pub(super) fn source_reliability(k: &Case, p: &mut Plan) {
    let x = k.x;
    p.reliabilities[1] = k.reliability("iot", 0.90, 0.95);
    p.reliabilities[2] = k.reliability("edge", 0.52, 0.56);
    p.reports = vec![
        condition(Edge, x, k.confidence("a", 0.92, 0.97), 10, 0),
        condition(
            Iot,
            x.opposite(),
            k.confidence("b", 0.80, 0.86),
            20,
            k.delay,
        ),
    ];
    p.expected.events = events(&[&[Update], &[Isolate], &[Delayed, Onset, Update]]);
    p.expected.state = x.opposite();
    p.confidence_only_state = Some(x);
}

/// Two same-epoch reports disagree and the contradiction stays open: on even cases the
/// first holds, on odd cases a delayed reliable report overturns it.
pub(super) fn contradiction_onset(k: &Case, p: &mut Plan) {
    if k.even {
        p.reports = vec![
            condition(Iot, State::Normal, k.confidence("a", 0.85, 0.95), 10, 0),
            condition(
                Robot,
                State::Anomalous,
                k.confidence("b", 0.72, 0.82),
                20,
                0,
            ),
        ];
        p.expected.events = events(&[&[Update], &[Isolate], &[Onset, Preserve]]);
        p.expected.state = State::Normal;
        p.expected.direction = Weakened;
    } else {
        p.reports = vec![
            condition(
                Robot,
                State::Anomalous,
                k.confidence("a", 0.70, 0.78),
                10,
                0,
            ),
            condition(
                Iot,
                State::Normal,
                k.confidence("b", 0.85, 0.95),
                20,
                k.delay,
            ),
        ];
        p.expected.events = events(&[&[Update], &[Isolate], &[Delayed, Onset, Update]]);
        p.expected.state = State::Normal;
    }
}

/// A contradiction opens, then a delayed correction supersedes one side of it.
pub(super) fn contradiction_resolution(k: &Case, p: &mut Plan) {
    p.reliabilities[0] = k.reliability("robot", 0.72, 0.80);
    p.reliabilities[1] = k.reliability("iot", 0.88, 0.94);
    let conf = |name, lo, hi| k.confidence(name, lo, hi);
    p.reports = if k.even {
        vec![
            condition(Iot, State::Normal, conf("a", 0.80, 0.86), 10, 0),
            condition(Robot, State::Anomalous, conf("b", 0.78, 0.84), 20, 0),
            condition(Iot, State::Normal, conf("c", 0.93, 0.98), 30, k.delay),
        ]
    } else {
        vec![
            condition(Robot, State::Anomalous, conf("a", 0.70, 0.78), 10, 0),
            condition(Iot, State::Normal, conf("b", 0.85, 0.95), 20, 0),
            condition(Iot, State::Anomalous, conf("c", 0.90, 0.97), 30, k.delay),
        ]
    };
    p.reports[2].supersedes = vec![1];
    if k.case == 0 {
        published_worked_example(p);
    }
    if k.even {
        p.expected.events = events(&[
            &[Update],
            &[Isolate],
            &[Onset, Preserve],
            &[Delayed, Resolution, Preserve],
        ]);
        p.expected.state = State::Normal;
        p.expected.direction = Strengthened;
        p.expected.action = ActionType::Monitor;
    } else {
        p.expected.events = events(&[
            &[Update],
            &[Isolate],
            &[Onset, Update],
            &[Delayed, Resolution, Update],
        ]);
        p.expected.state = State::Anomalous;
        p.expected.action = ActionType::Inspect;
    }
}

/// Case 0 of contradiction resolution is the published worked example, value for value.
fn published_worked_example(p: &mut Plan) {
    p.reliabilities = [0.78, 0.91, 0.52];
    p.reports[0].confidence = 0.83;
    p.reports[1].confidence = 0.84;
    p.reports[2].confidence = 0.96;
    p.reports[2].arrival_s = 34;
    p.distractor.confidence = 0.6;
}

/// A report from an older epoch arrives late and is set aside, beside a delayed report
/// of the current epoch that counts; even cases take the delayed one first.
pub(super) fn stale_delayed_evidence(k: &Case, p: &mut Plan) {
    let x = k.x;
    let mut current = condition(Iot, x, k.confidence("a", 0.80, 0.90), 10, 0);
    let (late_event, stale_arrival) = if k.even { (20, 30) } else { (26, 20) };
    let mut late = condition(Robot, x, k.confidence("d", 0.70, 0.85), late_event, k.delay);
    let mut stale = condition(Edge, x.opposite(), k.confidence("s", 0.80, 0.95), 5, 0);
    stale.arrival_s = stale_arrival;
    current.epoch = 2;
    late.epoch = 2;
    p.distractor.epoch = 2;
    if k.even {
        p.reports = vec![current, late, stale];
        p.expected.events = events(&[
            &[Update],
            &[Isolate],
            &[Delayed, Preserve],
            &[Delayed, Stale, Preserve],
        ]);
        p.expected.direction = Preserved;
    } else {
        p.reports = vec![current, stale, late];
        p.expected.events = events(&[
            &[Update],
            &[Isolate],
            &[Delayed, Stale, Preserve],
            &[Delayed, Preserve],
        ]);
        p.expected.direction = Strengthened;
    }
    p.expected.action = settle_action(x);
}

/// Two sensor readings disagree and only the one whose sensor measures the target
/// counts; the pair's twins share every draw and swap which sensor that is.
pub(super) fn relation_association(k: &Case, p: &mut Plan) {
    let pair = k.case / 2;
    let twin_b = k.case % 2 == 1;
    let v = state_of_parity(pair);
    let reading = |agent, sensor, value: State, name: &str, event_s| Report {
        agent,
        subject: sensor,
        predicate: ObservationPredicate::Reading,
        value: value.into(),
        confidence: k.confidence(name, 0.75, 0.95),
        event_s,
        arrival_s: event_s,
        epoch: 1,
        supersedes: Vec::new(),
    };
    p.reports = vec![
        reading(Iot, "sensor-a", v, "r1", 10),
        reading(Robot, "sensor-b", v.opposite(), "r2", 20),
    ];
    p.distractor.value = if pair <= 12 {
        ObservationValue::Nominal
    } else {
        ObservationValue::Unknown
    };
    p.distractor.event_s = 30;
    p.distractor.arrival_s = 30;
    p.distractor_object = format!("distractor-{:03}", pair * 2);
    p.pair_id = Some(format!("relation_association-pair-{pair:02}"));
    let (to_g1, to_g2) = if twin_b {
        ("sensor-b", "sensor-a")
    } else {
        ("sensor-a", "sensor-b")
    };
    p.relations = vec![measures(to_g1, "gauge-1"), measures(to_g2, "gauge-2")];
    p.expected.events = if twin_b {
        events(&[&[Isolate], &[Assoc, Update], &[Isolate]])
    } else {
        events(&[&[Assoc, Update], &[Isolate], &[Isolate]])
    };
    p.expected.state = if twin_b { v.opposite() } else { v };
    p.expected.direction = Preserved;
    p.expected.action = settle_action(p.expected.state);
}
