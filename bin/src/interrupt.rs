//! Undoing what a tool changed on the host when it is interrupted. Ctrl-C (SIGINT), SIGTERM
//! or SIGHUP would otherwise end the process without unwinding, so no `Drop` runs: the network
//! namespaces of `bth-perf local` and `bth-compare` stay behind (and the next run fails to
//! create them), and `bth-perf server` leaves IPv4 forwarding on.
//!
//! [`install`] blocks those signals in the calling thread, which every thread spawned after it
//! inherits, and waits for them in a thread of its own: on one it undoes what is registered,
//! says so, and exits with 128 + the signal's number, as a shell reports a process killed by
//! it. What is registered is removed again when its guard ([`Registered`]) drops, so a normal
//! end undoes nothing twice. Without [`install`] (the tests) registering does nothing else.
//!
//! Child processes inherit the blocked mask (Rust's `Command` keeps it across `exec` since
//! 1.66): the tools' only children are short `ip` calls, which need no signal. A long-running
//! child added later would need the mask cleared for it.

use nix::sys::signal::{SigSet, Signal};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Something to undo on a signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// `ip netns del NAME`.
    DeleteNetns(String),
    /// Write `value` back to the file at `path` (a sysctl under `/proc/sys`).
    Restore { path: String, value: String },
}

static PENDING: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Keeps an [`Undo`] registered until dropped.
#[derive(Debug)]
#[must_use = "the undo is forgotten as soon as the guard drops"]
pub struct Registered(u64);

/// Register `undo` to run if the process is interrupted before the guard drops.
pub fn on_interrupt(undo: Undo) -> Registered {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    lock().push((id, undo));
    Registered(id)
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock().retain(|(id, _)| *id != self.0);
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<(u64, Undo)>> {
    // A panic while holding the lock leaves the list as it was: still usable.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The signals that end a run early.
fn signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    set
}

/// Handle SIGINT, SIGTERM and SIGHUP from here on: call first in `main`, before any thread is
/// spawned (a thread spawned earlier would still die of them without undoing anything). On an
/// error the signals are left as they were (they end the process, undoing nothing).
pub fn install(tool: &'static str) -> io::Result<()> {
    let set = signals();
    set.thread_block().map_err(io::Error::from)?;
    let waiter = std::thread::Builder::new()
        .name("bth-signals".into())
        .spawn(move || {
            let Ok(sig) = set.wait() else {
                // Nobody would take them any more: let them act as before.
                let _ = set.thread_unblock();
                return;
            };
            // Held until the process exits: a thread that would register (and so create) a
            // namespace now waits instead of making one nobody deletes.
            let mut pending = lock();
            let undone: Vec<String> = pending.drain(..).rev().map(|(_, u)| run(&u)).collect();
            let what = if undone.is_empty() {
                String::new()
            } else {
                format!("; undid: {}", undone.join(", "))
            };
            // Not eprintln!: after SIGHUP the terminal may be gone, and a failed write must
            // not keep the process from exiting.
            let _ = writeln!(io::stderr(), "{tool}: interrupted by {sig}{what}");
            std::process::exit(128 + sig as i32);
        });
    if let Err(e) = waiter {
        let _ = signals().thread_unblock();
        return Err(e);
    }
    Ok(())
}

fn run(undo: &Undo) -> String {
    match undo {
        Undo::DeleteNetns(ns) => match crate::topology::ip(&["netns", "del", ns]) {
            Ok(()) => format!("deleted network namespace {ns}"),
            Err(e) => format!("could not delete network namespace {ns} ({e})"),
        },
        Undo::Restore { path, value } => match std::fs::write(path, value) {
            Ok(()) => format!("wrote {value} back to {path}"),
            Err(e) => format!("could not write {value} back to {path} ({e})"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_keeps_its_undo_registered_until_it_drops() {
        let path = std::env::temp_dir().join(format!("bth-undo-{}", std::process::id()));
        let path = path.to_string_lossy().into_owned();
        let kept = on_interrupt(Undo::Restore {
            path: path.clone(),
            value: "0".into(),
        });
        let gone = on_interrupt(Undo::Restore {
            path: "/nonexistent/dir/file".into(),
            value: "1".into(),
        });
        drop(gone);
        let pending: Vec<Undo> = lock().iter().map(|(_, u)| u.clone()).collect();
        assert!(pending.contains(&Undo::Restore {
            path: path.clone(),
            value: "0".into()
        }));
        assert!(!pending
            .iter()
            .any(|u| matches!(u, Undo::Restore { value, .. } if value == "1")));
        // What a signal would do with it (only this test's: other tests' undos may be
        // pending in the same process).
        let done = run(&Undo::Restore {
            path: path.clone(),
            value: "0".into(),
        });
        assert!(done.starts_with("wrote 0 back to"), "{done}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "0");
        drop(kept);
        assert!(lock()
            .iter()
            .all(|(_, u)| !matches!(u, Undo::Restore { path: p, .. } if *p == path)));
        let failed = run(&Undo::Restore {
            path: "/nonexistent/dir/file".into(),
            value: "1".into(),
        });
        assert!(failed.starts_with("could not write 1 back"), "{failed}");
        let _ = std::fs::remove_file(&path);
    }
}
