//! The memory this process may still take on the CPU: the one figure that both the
//! load check and the KV cache's budget use. The host's MemAvailable is not it inside a
//! memory cgroup (a Slurm job, a container): there the kernel kills the process once
//! its group's limit is reached, however much the host has free. The group is the
//! process's own, found through /proc/self/cgroup, under cgroup v2 or v1; every
//! ancestor's limit binds too.

use std::path::{Path, PathBuf};

/// Bytes available to this process: the smaller of MemAvailable and what its memory
/// cgroup leaves; None when neither can be read.
pub fn available() -> Option<u64> {
    available_under(Path::new("/proc"), Path::new("/sys"))
}

/// [`available`], reading `<proc>/meminfo`, `<proc>/self/cgroup` and the cgroup files
/// under `<sys>/fs/cgroup` (the tests pass fake roots).
pub fn available_under(proc: &Path, sys: &Path) -> Option<u64> {
    let host = mem_available(proc);
    let group = cgroup_available(proc, sys);
    match (host, group) {
        (Some(h), Some(g)) => Some(h.min(g)),
        (h, g) => h.or(g),
    }
}

fn mem_available(proc: &Path) -> Option<u64> {
    let meminfo = std::fs::read_to_string(proc.join("meminfo")).ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The files of one cgroup version: the limit, the usage, and the key of memory.stat
/// that counts page cache the kernel reclaims before it kills (a model's file, read
/// once, is charged to the group but does not count against what a load may take).
struct Version {
    limit: &'static str,
    usage: &'static str,
    reclaimable: &'static str,
}

const V2: Version = Version {
    limit: "memory.max",
    usage: "memory.current",
    reclaimable: "inactive_file",
};

const V1: Version = Version {
    limit: "memory.limit_in_bytes",
    usage: "memory.usage_in_bytes",
    reclaimable: "total_inactive_file",
};

/// The least that the process's group or any group above it leaves free.
fn cgroup_available(proc: &Path, sys: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(proc.join("self").join("cgroup")).ok()?;
    let root = sys.join("fs").join("cgroup");
    let mut least: Option<u64> = None;
    for line in text.lines() {
        // hierarchy-id:controllers:path
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (mount, version) = if id == "0" && controllers.is_empty() {
            (root.clone(), &V2)
        } else if controllers.split(',').any(|c| c == "memory") {
            (root.join("memory"), &V1)
        } else {
            continue;
        };
        for dir in groups(&mount, path) {
            if let Some(free) = group_free(&dir, version) {
                least = Some(least.map_or(free, |l| l.min(free)));
            }
        }
    }
    least
}

/// The folders of `path`'s group and of each group above it, that exist under `mount`.
/// In a container without a cgroup namespace, /proc/self/cgroup names the host's path
/// while the container sees its own group at the mount's root: the root is always
/// among them.
fn groups(mount: &Path, path: &str) -> Vec<PathBuf> {
    let mut out = vec![mount.to_path_buf()];
    let mut dir = mount.to_path_buf();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if part == ".." || part == "." {
            break;
        }
        dir.push(part);
        if dir.is_dir() {
            out.push(dir.clone());
        }
    }
    out
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Limit minus usage (less reclaimable page cache) in one group; None without a limit.
fn group_free(dir: &Path, v: &Version) -> Option<u64> {
    // v2 writes "max" for no limit, which does not parse; v1 writes a huge number.
    let limit = read_number(&dir.join(v.limit))?;
    let usage = read_number(&dir.join(v.usage)).unwrap_or(0);
    let reclaimable = std::fs::read_to_string(dir.join("memory.stat"))
        .ok()
        .and_then(|stat| {
            stat.lines().find_map(|l| {
                l.strip_prefix(v.reclaimable)?
                    .strip_prefix(' ')?
                    .trim()
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0u64);
    Some(limit.saturating_sub(usage.saturating_sub(reclaimable)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// Fake /proc and /sys roots: MemAvailable of 32 GiB, /proc/self/cgroup as given,
    /// and `files` (path under /sys/fs/cgroup, content).
    fn roots(name: &str, cgroup: &str, files: &[(&str, String)]) -> (PathBuf, PathBuf) {
        let base = std::env::temp_dir().join(format!("host-memory-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (proc, sys) = (base.join("proc"), base.join("sys"));
        std::fs::create_dir_all(proc.join("self")).unwrap();
        std::fs::write(
            proc.join("meminfo"),
            format!(
                "MemTotal: 67108864 kB\nMemFree: 1000 kB\nMemAvailable: {} kB\n",
                32 * GIB / 1024
            ),
        )
        .unwrap();
        std::fs::write(proc.join("self/cgroup"), cgroup).unwrap();
        for (path, content) in files {
            let p = sys.join("fs/cgroup").join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        (proc, sys)
    }

    #[test]
    fn a_v2_job_group_of_1_gib_bounds_the_memory_not_the_hosts_32() {
        let (proc, sys) = roots(
            "v2",
            "0::/system.slice/slurmstepd.scope/job_7/step_0\n",
            &[
                ("memory.max", "max\n".into()),
                ("memory.current", format!("{}\n", 20 * GIB)),
                (
                    "system.slice/slurmstepd.scope/job_7/memory.max",
                    format!("{GIB}\n"),
                ),
                (
                    "system.slice/slurmstepd.scope/job_7/memory.current",
                    format!("{}\n", 100 << 20),
                ),
                (
                    "system.slice/slurmstepd.scope/job_7/memory.stat",
                    format!(
                        "anon 1000\nfile 50\ninactive_file {}\nactive_file 7\n",
                        24 << 20
                    ),
                ),
                (
                    "system.slice/slurmstepd.scope/job_7/step_0/memory.max",
                    "max\n".into(),
                ),
                (
                    "system.slice/slurmstepd.scope/job_7/step_0/memory.current",
                    "1000\n".into(),
                ),
            ],
        );
        // The job's limit less its usage, page cache it can reclaim given back.
        assert_eq!(
            available_under(&proc, &sys),
            Some(GIB - (100 << 20) + (24 << 20))
        );
    }

    #[test]
    fn a_v1_memory_group_bounds_the_memory_and_the_unlimited_root_does_not() {
        let (proc, sys) = roots(
            "v1",
            "12:cpu,cpuacct:/slurm/uid_0/job_9\n5:memory:/slurm/uid_0/job_9\n0::/\n",
            &[
                (
                    "memory/memory.limit_in_bytes",
                    "9223372036854771712\n".into(),
                ),
                ("memory/memory.usage_in_bytes", format!("{}\n", 3 * GIB)),
                (
                    "memory/slurm/uid_0/job_9/memory.limit_in_bytes",
                    format!("{}\n", 2 * GIB),
                ),
                (
                    "memory/slurm/uid_0/job_9/memory.usage_in_bytes",
                    format!("{}\n", GIB / 2),
                ),
            ],
        );
        assert_eq!(available_under(&proc, &sys), Some(2 * GIB - GIB / 2));
    }

    #[test]
    fn a_container_seeing_its_own_group_at_the_root_is_bounded_by_it() {
        // /proc/self/cgroup names the host's path; the container mounts its group at /.
        let (proc, sys) = roots(
            "container",
            "0::/docker/0123abcd\n",
            &[
                ("memory.max", format!("{}\n", 4 * GIB)),
                ("memory.current", format!("{}\n", GIB)),
            ],
        );
        assert_eq!(available_under(&proc, &sys), Some(3 * GIB));
    }

    #[test]
    fn without_a_memory_limit_the_hosts_available_memory_holds() {
        let (proc, sys) = roots(
            "none",
            "0::/user.slice\n",
            &[("memory.max", "max\n".into())],
        );
        assert_eq!(available_under(&proc, &sys), Some(32 * GIB));
        let (proc, sys) = roots("nofile", "", &[]);
        assert_eq!(available_under(&proc, &sys), Some(32 * GIB));
    }
}
