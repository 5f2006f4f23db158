//! A real memory cgroup for one child process, as Slurm gives a job: made under the test
//! process's own group (cgroup v1 or v2), its limit set, and removed again on drop.
//! Making one needs write access to the cgroup tree (root in a container, or a
//! delegated v2 subtree); where that is missing, [`MemoryCgroup::create`] says why and
//! the test reports itself skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct MemoryCgroup {
    dir: PathBuf,
    procs: PathBuf,
}

impl MemoryCgroup {
    /// A new group named `name` under this process's memory group, limited to `limit`
    /// bytes; Err says why none could be made.
    pub fn create(name: &str, limit: u64) -> Result<MemoryCgroup, String> {
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
                (root.to_path_buf(), "memory.max")
            } else if controllers.split(',').any(|c| c == "memory") {
                (root.join("memory"), "memory.limit_in_bytes")
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
            let group = MemoryCgroup {
                procs: dir.join("cgroup.procs"),
                dir,
            };
            match std::fs::write(group.dir.join(limit_file), limit.to_string()) {
                Ok(()) => return Ok(group),
                Err(e) => tried.push(format!("{}: {e}", group.dir.join(limit_file).display())),
            }
        }
        Err(if tried.is_empty() {
            "no memory cgroup in /proc/self/cgroup".into()
        } else {
            tried.join("; ")
        })
    }

    /// `exe args…`, moved into the group before it starts.
    pub fn command(&self, exe: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(r#"echo $$ > "$0" && shift && exec "$@""#)
            .arg(&self.procs)
            .arg("--")
            .arg(exe)
            .args(args);
        c
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The child has exited by now; a group with no process left can be removed.
        let _ = std::fs::remove_dir(&self.dir);
    }
}
