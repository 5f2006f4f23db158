//! A real cgroup for one child process, as Slurm or a container gives a job: made under
//! the test process's own group (cgroup v1 or v2), its limit set, and removed again on
//! drop. Making one needs write access to the cgroup tree (root in a container, or a
//! delegated v2 subtree); where that is missing, [`TestCgroup::create`] says why and
//! the test reports itself skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The limit a group sets.
#[derive(Clone, Copy)]
pub enum Limit {
    /// Bytes of memory.
    Memory(u64),
    /// Processes and threads (the served tests; the real-checkpoint tests use none).
    #[allow(dead_code)]
    Pids(u32),
}

impl Limit {
    /// The v1 hierarchy's controller, and the limit's file in v1 and in v2.
    fn files(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Limit::Memory(_) => ("memory", "memory.limit_in_bytes", "memory.max"),
            Limit::Pids(_) => ("pids", "pids.max", "pids.max"),
        }
    }

    fn value(self) -> String {
        match self {
            Limit::Memory(bytes) => bytes.to_string(),
            Limit::Pids(n) => n.to_string(),
        }
    }
}

pub struct TestCgroup {
    dir: PathBuf,
}

impl TestCgroup {
    /// A new group named `name` under this process's group of the limit's controller;
    /// Err says why none could be made.
    pub fn create(name: &str, limit: Limit) -> Result<TestCgroup, String> {
        let (controller, v1_file, v2_file) = limit.files();
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let root = Path::new("/sys/fs/cgroup");
        let mut tried = Vec::new();
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (mount, limit_file) = if id == "0" && controllers.is_empty() {
                (root.to_path_buf(), v2_file)
            } else if controllers.split(',').any(|c| c == controller) {
                (root.join(controller), v1_file)
            } else {
                continue;
            };
            let parent = mount.join(path.trim_start_matches('/'));
            let parent = if parent.is_dir() { parent } else { mount };
            let dir = parent.join(format!("{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir(&dir);
            if let Err(e) = std::fs::create_dir(&dir) {
                tried.push(format!("{}: {e}", dir.display()));
                continue;
            }
            let group = TestCgroup { dir };
            match std::fs::write(group.dir.join(limit_file), limit.value()) {
                Ok(()) => return Ok(group),
                Err(e) => tried.push(format!("{}: {e}", group.dir.join(limit_file).display())),
            }
        }
        Err(if tried.is_empty() {
            format!("no {controller} cgroup in /proc/self/cgroup")
        } else {
            tried.join("; ")
        })
    }

    /// `exe args…`, moved into the group before it starts.
    pub fn command(&self, exe: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(r#"echo $$ > "$0" && shift && exec "$@""#)
            .arg(self.dir.join("cgroup.procs"))
            .arg("--")
            .arg(exe)
            .args(args);
        c
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // The child has exited by now; a group with no process left can be removed.
        let _ = std::fs::remove_dir(&self.dir);
    }
}
