//! A real model inside a memory cgroup smaller than it needs (a Slurm job's limit) is
//! refused with the figures before loading, not killed by the kernel part-way through.

use crate::cgroup::{Limit, TestCgroup};
use crate::{real, runner_exe, SMOLLM2};

#[test]
fn smollm2_in_f32_inside_a_512_mib_cgroup_is_refused_with_the_groups_figure() {
    let Some(model) = real(SMOLLM2) else { return };
    let group = match TestCgroup::create("creg-real-load", Limit::Memory(512 << 20)) {
        Ok(g) => g,
        Err(why) => {
            eprintln!("skipped: no memory cgroup can be made here ({why})");
            return;
        }
    };
    let o = group
        .command(
            &runner_exe(),
            &[
                "generate",
                "--model",
                model.to_str().unwrap(),
                "--prompt",
                "hi",
                "--dtype",
                "f32",
                "--device",
                "cpu",
            ],
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "not refused cleanly:\n{err}");
    for part in [
        "does not fit in memory",
        "f32 weights take 0.5 GB",
        "--dtype bf16",
    ] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }
    let available: f64 = err
        .split(" GB available")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no available figure in: {err}"));
    assert!(
        available <= 0.54,
        "the group's 512 MiB is not what bounds it: {err}"
    );
}
