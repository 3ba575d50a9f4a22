//! Which process, on which host, made a temporary file: the tag in its name, and whether that
//! process still runs.
//!
//! A process id alone does not say: on a cluster's shared file system a rank on another node
//! has its own process 4242, and containers on one host each number their processes from 1.
//! So temporary profiles are named with a tag `<pid>-<start>-<pidns>-<boot>`: the process id,
//! its start time (field 22 of `/proc/self/stat`, clock ticks since boot, which tells a reused
//! pid from the original), the inode of its pid namespace (`/proc/self/ns/pid`) and the first
//! 16 hex digits of the kernel's boot id (`/proc/sys/kernel/random/boot_id`, random per boot
//! and per host; containers of one host share it, hence the namespace).
//!
//! [`tag_alive`] judges a tag: only a tag of this boot and this pid namespace can be found
//! dead (no such process, or a process of that id that started at another time; and only when
//! `/proc` shows this namespace's process ids). Anything
//! else — another host or container, a part this process could not read, a name in the old
//! format with a bare pid, a name that does not parse — counts as alive, so its file is left
//! alone: a stale file left by a crash elsewhere costs disk space, never a live run's output.

use std::io;

/// This process's identity, as far as `/proc` tells it (0 for a part it cannot read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcTag {
    pub pid: u32,
    pub start: u64,
    pub ns: u64,
    pub boot: u64,
}

impl ProcTag {
    /// This process, now (a forked child gets its own tag).
    pub(crate) fn here() -> ProcTag {
        ProcTag {
            pid: std::process::id(),
            start: start_time("self").unwrap_or(0),
            ns: pid_namespace().unwrap_or(0),
            boot: boot_id().unwrap_or(0),
        }
    }

    /// The tag as it appears in file names.
    pub(crate) fn render(&self) -> String {
        format!(
            "{}-{:x}-{:x}-{:016x}",
            self.pid, self.start, self.ns, self.boot
        )
    }

    /// Parses [`render`](Self::render)'s output.
    pub(crate) fn parse(s: &str) -> Option<ProcTag> {
        let mut it = s.split('-');
        let pid = it.next()?.parse().ok()?;
        let hex = |p: Option<&str>| p.and_then(|p| u64::from_str_radix(p, 16).ok());
        let (start, ns, boot) = (hex(it.next())?, hex(it.next())?, hex(it.next())?);
        it.next().is_none().then_some(ProcTag {
            pid,
            start,
            ns,
            boot,
        })
    }
}

/// Whether the process `tag` names may still run (see the module docs): false only for a tag
/// of this host and pid namespace whose process is gone or whose pid was reused.
pub(crate) fn tag_alive(tag: &ProcTag) -> bool {
    let here = ProcTag::here();
    if here.boot == 0 || here.ns == 0 || tag.boot != here.boot || tag.ns != here.ns {
        return true;
    }
    if tag.pid == 0 || tag.pid > i32::MAX as u32 || !proc_is_ours() {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(tag.pid as i32, 0) };
    if r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    // It exists: the same process only if it started when the tag says (a tag without a
    // start time cannot tell a reused pid).
    match start_time(&tag.pid.to_string()) {
        Some(start) if tag.start != 0 => start == tag.start,
        _ => true,
    }
}

/// Whether `/proc` shows this pid namespace (a container may see its host's `/proc`, whose
/// numbers are not the ones `kill` takes here).
fn proc_is_ours() -> bool {
    std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str()?.parse::<u32>().ok())
        == Some(std::process::id())
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`.
fn start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses: the
    // fields after it start after the last `)`, with field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// The inode of this process's pid namespace.
fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// The first 64 bits of the kernel's boot id.
fn boot_id() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let hex: String = s.trim().chars().filter(|c| *c != '-').take(16).collect();
    u64::from_str_radix(&hex, 16).ok().filter(|b| *b != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_its_tag_round_trips() {
        let here = ProcTag::here();
        assert_eq!(here.pid, std::process::id());
        assert!(here.start > 0 && here.ns > 0 && here.boot > 0, "{here:?}");
        assert_eq!(ProcTag::parse(&here.render()), Some(here));
        assert!(tag_alive(&here));
    }

    #[test]
    fn a_dead_or_reused_pid_here_is_dead_and_elsewhere_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let here = ProcTag::here();
        let gone = ProcTag { pid: dead, ..here };
        assert!(!tag_alive(&gone), "a process that exited");
        let reused = ProcTag {
            start: here.start + 1,
            ..here
        };
        assert!(!tag_alive(&reused), "this pid with another start time");
        for other in [
            ProcTag {
                boot: here.boot ^ 1,
                ..gone
            },
            ProcTag {
                ns: here.ns ^ 1,
                ..gone
            },
        ] {
            assert!(tag_alive(&other), "another host or namespace: {other:?}");
        }
    }

    #[test]
    fn malformed_tags_do_not_parse() {
        for s in [
            "",
            "12",
            "12-1-2",
            "12-1-2-3-4",
            "x-1-2-3",
            "12-g-2-3",
            "-1-2-3",
        ] {
            assert_eq!(ProcTag::parse(s), None, "{s}");
        }
    }
}
