//! `runner bench` from the command line on a tiny fixture: the Markdown table a person
//! reads and the JSON lines scripts read. A tiny workload (a few seconds in a debug
//! build): the figures' size says nothing, their presence and sign do.

use std::process::Command;

fn runner(args: &[&str]) -> String {
    let out = Command::new(crate::common::runner_exe())
        .args(args)
        .output()
        .expect("the runner binary runs");
    assert!(
        out.status.success(),
        "runner {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

const TINY: [&str; 14] = [
    "bench",
    "--arch",
    "qwen2",
    "--size",
    "tiny",
    "--device",
    "cpu",
    "--batch",
    "1,3",
    "--prompt-tokens",
    "24",
    "--new-tokens",
    "6",
    "--repeat=1",
];

fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn runner_bench_prints_a_table_of_positive_figures_with_units() {
    let out = runner(&TINY);
    let caption = out.lines().next().unwrap_or_default();
    assert!(
        caption.starts_with("engine: ") && caption.contains("sampling: greedy"),
        "{out}"
    );
    let table: Vec<&str> = out.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(
        table.len(),
        4,
        "header, rule and one row per batch size:\n{out}"
    );
    let header = cells(table[0]);
    // The compact table: the rest of the figures are in --json.
    assert!(
        caption.contains("workload: 24 prompt tokens, 6 new tokens"),
        "{out}"
    );
    for want in [
        "batch",
        "row limit",
        "prefill (tok/s)",
        "decode (tok/s)",
        "kv cache (MiB)",
        "step forward (ms)",
        "step sampler (ms)",
    ] {
        assert!(
            header.iter().any(|h| h == want),
            "no {want:?} in {header:?}"
        );
    }
    assert!(
        cells(table[1]).iter().all(|r| r.ends_with(':')),
        "every column is numeric, so right-aligned: {}",
        table[1]
    );
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (line, batch) in table[2..].iter().zip([1.0, 3.0]) {
        let row = cells(line);
        assert_eq!(row.len(), header.len(), "{line}");
        let number = |name: &str| -> f64 {
            let cell = &row[col(name)];
            cell.parse()
                .unwrap_or_else(|_| panic!("{name}: {cell:?} is not a number"))
        };
        // Every filled cell is a number; none is negative.
        for (h, cell) in header.iter().zip(&row) {
            if !cell.is_empty() {
                let x: f64 = cell
                    .parse()
                    .unwrap_or_else(|_| panic!("{h}: {cell:?} is not a number"));
                assert!(x >= 0.0, "{h}: {x}");
            }
        }
        assert_eq!(number("batch"), batch);
        for name in ["prefill (tok/s)", "decode (tok/s)", "kv cache (MiB)"] {
            assert!(number(name) > 0.0, "{name} in {line}");
        }
    }
}

#[test]
fn runner_bench_json_prints_one_parsable_object_per_batch_size() {
    let mut args = TINY.to_vec();
    args.push("--json");
    let out = runner(&args);
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for (r, batch) in rows.iter().zip([1, 3]) {
        assert_eq!(r["batch"], batch);
        assert_eq!(r["prompt_tokens"], 24);
        assert_eq!(r["sampling"], "greedy");
        for key in ["prefill_tok_per_s", "decode_tok_per_s", "kv_cache_mib"] {
            assert!(r[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {r}");
        }
        assert!(r["step_ms"]["forward"].as_f64().is_some(), "{r}");
        // The binary installs the counting allocator: every decode step allocates (on
        // the CPU each candle op allocates its output).
        for key in ["allocs_per_step", "alloc_mib_per_step"] {
            assert!(r[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {r}");
        }
    }
}

/// Bytes allocated per decode step grow with the rows. Not between 1 and 3 rows of the
/// tiny fixture: narrow products are padded to a minimum row count (`row_matmul`), so a
/// few rows allocate what one does, and rayon's splitting varies the small rest from
/// run to run. At 64 rows the logits and the wider products dominate (about 0.56 MiB at
/// 1 row, 0.94 at 48). Well under a second in the test profile.
#[test]
fn runner_bench_counts_more_bytes_per_step_for_more_rows() {
    let out = runner(&[
        "bench",
        "--size",
        "tiny",
        "--device",
        "cpu",
        "--batch",
        "1,64",
        "--prompt-tokens",
        "24",
        "--new-tokens",
        "6",
        "--repeat=1",
        "--json",
    ]);
    let mib: Vec<f64> = out
        .lines()
        .map(|l| {
            let r: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            r["alloc_mib_per_step"]
                .as_f64()
                .unwrap_or_else(|| panic!("no alloc_mib_per_step in {l}"))
        })
        .collect();
    assert_eq!(mib.len(), 2, "{out}");
    assert!(mib[1] > mib[0], "64 rows against 1: {mib:?}");
}

#[test]
fn runner_bench_sampler_prints_its_table() {
    let out = runner(&[
        "bench",
        "--sampler",
        "--device",
        "cpu",
        "--batch",
        "2",
        "--vocab",
        "2000",
        "--repeat",
        "2",
        "--sampling",
        "protocol",
    ]);
    assert!(
        out.starts_with("bench: sampler; device: cpu; sampling: protocol\n"),
        "{out}"
    );
    let table: Vec<&str> = out.lines().filter(|l| l.starts_with('|')).collect();
    let header = cells(table[0]);
    assert_eq!(
        header[..3],
        ["rows".to_string(), "vocab".into(), "rounds".into()]
    );
    for column in [
        "reference (ms/step)",
        "whole rows (ms/step)",
        "blocks (ms/step)",
        "blocks host (ms/step)",
        "whole rows (KiB/step)",
        "blocks (KiB/step)",
    ] {
        assert!(header.contains(&column.to_string()), "{header:?}");
    }
    let row = cells(table[2]);
    assert_eq!(row[..3], ["2".to_string(), "2000".into(), "2".into()]);
}

/// `runner bench --sampling protocol` measures the benchmark protocol's sampling: the
/// engine keeps its own copy (it names no protocol), which must be the core's.
#[test]
fn the_benchs_protocol_sampling_is_the_protocols() {
    use runner_engine::bench::{BenchSampling, PROTOCOL_SAMPLING};
    assert_eq!(PROTOCOL_SAMPLING, runner_core::protocol::SAMPLING);
    assert_eq!(
        BenchSampling::Protocol.sampling(),
        runner_core::protocol::SAMPLING
    );
}
