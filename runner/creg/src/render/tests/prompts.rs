//! Whole prompts: no later evidence, no labels, unique ids, pinned hashes.

use crate::render::tests::*;

fn mentions(text: &str, id: &str) -> bool {
    let is_id_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(id).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + id.len()..].chars().next();
        !before.is_some_and(is_id_char) && !after.is_some_and(is_id_char)
    })
}

#[test]
fn no_prompt_mentions_evidence_that_has_not_arrived() {
    let r = renderer();
    let mut checked = 0;
    for s in suite() {
        let order = s.arrival_order();
        for c in Condition::ALL {
            for task in Task::ALL {
                r.prompts(s, c, task, &mut |p: Prompt| {
                    for (i, o) in order.iter().enumerate() {
                        let arrived = i < p.step;
                        assert_eq!(
                            mentions(&p.text, o.id.as_str()),
                            arrived,
                            "{} {c} {task} step {}: {}",
                            s.id,
                            p.step,
                            o.id
                        );
                    }
                    checked += 1;
                });
            }
        }
    }
    assert_eq!(checked, 9 * (1150 + 3 * 350));
}

#[test]
fn bodies_do_not_depend_on_the_reference_labels() {
    let r = renderer();
    for s in suite().iter().step_by(11) {
        let mut blind = s.clone();
        blind.evaluation.belief_trajectory.reverse();
        blind.evaluation.evidence.clear();
        blind.evaluation.beliefs.reference_distribution.anomalous = 0.123456;
        blind
            .evaluation
            .contradictions
            .involved_evidence_ids
            .clear();
        blind.metadata.counterfactual_pair_id = Some("leak".into());
        for c in Condition::ALL {
            for step in 1..=s.observations.len() {
                let body = r.body(s, c, step);
                assert_eq!(body, r.body(&blind, c, step), "{} {c}", s.id);
                for word in [
                    "reference_",
                    "probability_direction",
                    "admissible",
                    "expected_update",
                    "leak",
                    "evaluation-v1",
                ] {
                    assert!(!body.contains(word), "{} {c}: {word}", s.id);
                }
            }
        }
    }
}

/// The fact sets above cannot see a repeated record; the counts can.
#[test]
fn every_record_appears_once() {
    let fixed = |s: &Scenario| s.agents.len() + s.objects.len();
    for (s, step, v) in json(Condition::FullGraph) {
        assert_eq!(arr(&v, "nodes").len(), fixed(s) + step, "{}", s.id);
        assert_eq!(
            arr(&v, "links").len(),
            2 * step + s.relations.len(),
            "{}",
            s.id
        );
    }
    for (s, step, v) in json(Condition::FlatEdgeRemoved) {
        let n = fixed(s) + step + s.relations.len();
        assert_eq!(arr(&v, "records").len(), n, "{}", s.id);
    }
    for (s, step, v) in json(Condition::CanonicalJson) {
        // Two facts per agent and entity, nine per report, one line per relation.
        let n = 2 * fixed(s) + 9 * step + s.relations.len();
        assert_eq!(arr(&v, "triples").len(), n, "{}", s.id);
    }
    for (s, step, text) in data_parts(Condition::StructuredList) {
        let items = text.lines().filter(|l| l.starts_with("- ")).count();
        assert_eq!(items, fixed(s) + step + s.relations.len(), "{}", s.id);
    }
}

#[test]
fn request_ids_are_unique_and_counts_match_the_suite() {
    let r = renderer();
    let mut ids = BTreeSet::new();
    let mut per_task: BTreeMap<Task, usize> = BTreeMap::new();
    for s in suite() {
        for c in Condition::ALL {
            for task in Task::ALL {
                r.prompts(s, c, task, &mut |p: Prompt| {
                    assert!(
                        ids.insert(p.request_id.clone()),
                        "duplicate {}",
                        p.request_id
                    );
                    *per_task.entry(task).or_default() += 1;
                });
            }
        }
    }
    assert_eq!(per_task[&Task::Belief], 9 * 1150);
    for t in [Task::Contradiction, Task::Action, Task::Explanation] {
        assert_eq!(per_task[&t], 9 * 350);
    }
}

/// The hashes the manifest reports. Any change to a template, a legend or a renderer
/// moves one of them: update them deliberately, with the prompts version.
#[test]
fn manifest_hashes_are_pinned() {
    let r = renderer();
    let mut files = Vec::new();
    let mut conditions = Vec::new();
    for c in Condition::ALL {
        let mut lines = String::new();
        for task in Task::ALL {
            let e = render_file(r, suite(), c, task).entry();
            lines.push_str(&format!("{}  {}\n", e.sha256, e.path));
            files.push(e);
        }
        conditions.push((
            c.name(),
            runner_engine::digest::sha256_hex(lines.as_bytes()),
        ));
    }
    let m = manifest::manifest(r, files);
    assert_eq!(m.total_prompts, 9 * (1150 + 3 * 350));
    let templates: Vec<(&str, String)> = m
        .templates
        .iter()
        .map(|t| (t.path, t.sha256.clone()))
        .collect();
    let pinned = |v: &[(&'static str, &'static str)]| -> Vec<(&'static str, String)> {
        v.iter().map(|(p, h)| (*p, h.to_string())).collect()
    };
    let ok = templates == pinned(&PINNED_TEMPLATES)
        && conditions == pinned(&PINNED_CONDITIONS)
        && m.bundle_sha256 == PINNED_BUNDLE;
    if !ok {
        // Printed so that a deliberate change can be pinned by pasting.
        let list = |v: &[(&str, String)]| -> String {
            v.iter()
                .map(|(p, h)| format!("    (\"{p}\", \"{h}\"),\n"))
                .collect()
        };
        panic!(
            "prompt hashes moved; if deliberate, bump PROMPTS_VERSION or the file versions and pin:\n\
             const PINNED_TEMPLATES: [(&str, &str); {}] = [\n{}];\n\
             const PINNED_CONDITIONS: [(&str, &str); 9] = [\n{}];\n\
             const PINNED_BUNDLE: &str = \"{}\";",
            templates.len(),
            list(&templates),
            list(&conditions),
            m.bundle_sha256
        );
    }
}

const PINNED_TEMPLATES: [(&str, &str); 14] = [
    (
        "prompts/legend/evidence.v1.txt",
        "d363c4fd2d34d275dc73e4b57321c9d079c0a6264d643d29e0a55896f7cc44b1",
    ),
    (
        "prompts/legend/graph.v1.txt",
        "8a8712b59dfc472f555dce1f4bc4f2f770da9b0020c37bd987eec1d7e545bab3",
    ),
    (
        "prompts/legend/flat.v1.txt",
        "f497bd41d5d693af5d2b708a79a404ff9899acaf076dcae8e8bd8d5994a66499",
    ),
    (
        "prompts/legend/canonical_json.v1.txt",
        "1a3235deefcd5d79c79c134d47bf3018ccefeae469186fd781d9bdee86f05088",
    ),
    (
        "prompts/legend/structured_list.v1.txt",
        "fa52257fc82733481051fc7651f990d089bb6c58093451bef920543a8b138861",
    ),
    (
        "prompts/tasks/preamble.v1.txt",
        "95c27392a7c1b5f9ad68e75a82b664a00678fe1c527b24b3b8ceb674343d4a87",
    ),
    (
        "prompts/tasks/belief.v1.txt",
        "a959585194f092018c001fe4af8a1c3db7ef6cc8ec25a315e6c8f62704fffb82",
    ),
    (
        "prompts/tasks/contradiction.v1.txt",
        "2146a3adf266451b09b9c801b77a4716b4f4993ab79be3e8895aa9b599719f72",
    ),
    (
        "prompts/tasks/action.v1.txt",
        "6d6dc8b9091fd5d907e734d59bc89b9826442bf6b281982f7dc4d1bc8863b0b0",
    ),
    (
        "prompts/tasks/explanation.v1.txt",
        "b5147e2b2a1d3edb7131cb4c3f68600904da0b53c880001da90f8bbff340e4a8",
    ),
    (
        "prompts/contracts/belief.v1.schema.json",
        "9919a868300099c47f9659e3e61fd79950b0a654d8c660287bbb84264c8bab9a",
    ),
    (
        "prompts/contracts/contradiction.v1.schema.json",
        "5373e151f628b09c9db076dc2df84ee742952015ce4d43e6bf26c7dfee6ea53b",
    ),
    (
        "prompts/contracts/action.v1.schema.json",
        "93355f941a315cad8b1962935ff9c9ccaf63bd49c832bcafa7dc87635248bc46",
    ),
    (
        "prompts/contracts/explanation.v1.schema.json",
        "0f7b9cfedf9ac3920fae58aa2431210c2ff1a7fe383d2c7e9476377fb36bc5d1",
    ),
];
const PINNED_CONDITIONS: [(&str, &str); 9] = [
    (
        "canonical_json",
        "586fe6aecb621b9203fd764580140f8ecb24c0ddfd3ec20a22ba4de6bcc0d6f6",
    ),
    (
        "structured_list",
        "d5a36ddb10670cd054121ad2a051ad67c544089184e50c7098aa7047c7d3095b",
    ),
    (
        "graph_without_relations",
        "1aa890258135578ebe48e7d1bcd59ea71d2cf65b2b018910a15112716b43e0e7",
    ),
    (
        "full_graph",
        "5095c3ede74421d2d03fd99e00793938510ba31920ae6267e7421f7db012d20a",
    ),
    (
        "flat_edge_removed",
        "b7eefeb5ee528d886172577fd9462fafd176bfd32fc6c1bd081785cb684787f7",
    ),
    (
        "no_provenance",
        "ced2ef4f73d088b52868fd5db27bcf318d035909fa3bc292ec8a680704ea9dc7",
    ),
    (
        "no_timestamps",
        "5027d782c62de1399ce78aeb9a6fca614c3ab0dbcee4aeb18f38a3167360ab98",
    ),
    (
        "no_confidence",
        "075084ac049e44a7330acb8ba129cd2ea48b84c6caaec0a31aa662a2109d38a7",
    ),
    (
        "shuffled_full_graph",
        "6bd2e3de6fd7f6697d8a39acff87b72f1380ab4e2ec857bf7fbefcb50948a2ae",
    ),
];
/// What `runner render` (all conditions, all tasks) prints as the bundle sha256.
const PINNED_BUNDLE: &str = "beaf1b39f9bf108f5db47f7a419b25bc164d614b127f9f7e46d602a7604a8815";
