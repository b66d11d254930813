//! What a tool does when it is interrupted: Ctrl-C (SIGINT), SIGTERM or SIGHUP would otherwise
//! end the process without unwinding, so no `Drop` runs: the network namespaces of `bth-perf
//! local` and `bth-compare` stay behind (and the next run fails to create them), `bth-perf
//! server` leaves IPv4 forwarding on, and the peer of every open connection hears nothing (it
//! waits for its time limit, or for its retransmissions to give up).
//!
//! [`install`] blocks those signals in the calling thread, which every thread spawned after it
//! inherits, and waits for them in a thread of its own. On one it first asks every driver loop
//! running a connection ([`DriverLoop`], one per `perf::drive::run_many`: `bth-perf server`,
//! `client`, both sides of `local`, `bth-compare`'s runs of ours) to abort its connections
//! with RST and write the RSTs into its TUN device, and waits for their answers, at most
//! [`LOOPS_WAIT`]; then it undoes what is registered ([`Undo`]), in that order, because the
//! RSTs of `local` leave through the namespaces it deletes. Then it says what it did and exits
//! with 128 + the signal's number, as a shell reports a process killed by it. What is
//! registered is removed again when its guard ([`Registered`], [`DriverLoop`]) drops, so a
//! normal end undoes nothing twice. Without [`install`] (the tests) registering does nothing
//! else.
//!
//! Child processes inherit the blocked mask (Rust's `Command` keeps it across `exec` since
//! 1.66): the tools' only children are short `ip` calls, which need no signal. A long-running
//! child added later would need the mask cleared for it.

use nix::sys::signal::{SigSet, Signal};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Something to undo on a signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// `ip netns del NAME`.
    DeleteNetns(String),
    /// Write `value` back to the file at `path` (a sysctl under `/proc/sys`).
    Restore {
        /// The file to write, e.g. `/proc/sys/net/ipv4/ip_forward`.
        path: String,
        /// What the file held before the run changed it.
        value: String,
    },
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
            // Before the undos: the RSTs of `local` leave through the namespaces they delete.
            let aborted = LOOPS.abort_all(LOOPS_WAIT).describe(LOOPS_WAIT);
            // Held until the process exits: a thread that would register (and so create) a
            // namespace now waits instead of making one nobody deletes.
            let mut pending = lock();
            let undone: Vec<String> = pending.drain(..).rev().map(|(_, u)| run(&u)).collect();
            let mut what: String = aborted.iter().map(|a| format!("; {a}")).collect();
            if !undone.is_empty() {
                what += &format!("; undid: {}", undone.join(", "));
            }
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

/// Wakes a driver loop out of its wait (`PacketIo::waker`).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// Longest the signal thread waits for the driver loops to answer before it undoes what is
/// registered and exits anyway. A loop notices at its next turn (a wait lasts at most a few
/// milliseconds, and its [`Wake`] ends it at once) and writes its RSTs in the turn after: a
/// few milliseconds in all. The bound is for a loop that does not turn again (stuck in a
/// system call, or starved of the CPU): an interrupted tool must still end, and its
/// namespaces and sysctls must still be put back, even if some peer then hears nothing.
pub const LOOPS_WAIT: Duration = Duration::from_millis(300);

/// The driver loops running now, and the signal thread's request to them.
struct Loops {
    /// Set once, by the signal thread: every loop aborts its connections at its next turn.
    asked: AtomicBool,
    state: Mutex<LoopsState>,
    /// Signalled when a loop answers or ends.
    changed: Condvar,
}

struct LoopsState {
    next: u64,
    running: Vec<(u64, Option<Wake>)>,
    /// Connections aborted by the loops that answered, and of those, the ones whose RSTs may
    /// not have left (the loop's data path failed while writing them).
    aborted: usize,
    unflushed: usize,
}

/// What became of the driver loops on a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Aborted {
    connections: usize,
    unflushed: usize,
    /// Loops still running when the wait ended: their connections got no RST.
    silent: usize,
}

impl Aborted {
    /// For the exit message; None when there was nothing to abort.
    fn describe(&self, waited: Duration) -> Option<String> {
        let plural = |n: usize, what: &str| match n {
            1 => format!("1 {what}"),
            n => format!("{n} {what}s"),
        };
        let mut parts = Vec::new();
        if self.connections > 0 {
            parts.push(format!(
                "aborted {} with RST",
                plural(self.connections, "connection")
            ));
        }
        if self.unflushed > 0 {
            parts.push(format!(
                "the RSTs of {} may not have left (data path error)",
                plural(self.unflushed, "connection")
            ));
        }
        if self.silent > 0 {
            parts.push(format!(
                "{} did not answer within {waited:?} (their connections got no RST)",
                plural(self.silent, "driver loop")
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

static LOOPS: Loops = Loops::new();

impl Loops {
    const fn new() -> Loops {
        Loops {
            asked: AtomicBool::new(false),
            state: Mutex::new(LoopsState {
                next: 0,
                running: Vec::new(),
                aborted: 0,
                unflushed: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LoopsState> {
        // A panic while holding the lock leaves the state as it was: still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&'static self, wake: Option<Wake>) -> DriverLoop {
        let mut s = self.lock();
        let id = s.next;
        s.next += 1;
        s.running.push((id, wake));
        DriverLoop { id, loops: self }
    }

    /// Loop `id` is no longer running; `aborted` connections it aborted, `flushed` whether
    /// their RSTs were written into the device.
    fn leave(&self, id: u64, aborted: usize, flushed: bool) {
        let mut s = self.lock();
        s.running.retain(|(i, _)| *i != id);
        s.aborted += aborted;
        if !flushed {
            s.unflushed += aborted;
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Ask every loop to abort its connections, wake each, and wait until every one has
    /// answered or ended, at most `limit`. A loop registered after this was asked sees the
    /// request at its first turn (the flag is set under the lock registering takes), and is
    /// waited for too.
    fn abort_all(&self, limit: Duration) -> Aborted {
        let until = Instant::now() + limit;
        let mut s = self.lock();
        self.asked.store(true, Ordering::SeqCst);
        for wake in s.running.iter().filter_map(|(_, w)| w.as_ref()) {
            wake();
        }
        while !s.running.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = match self.changed.wait_timeout(s, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        Aborted {
            connections: s.aborted,
            unflushed: s.unflushed,
            silent: s.running.len(),
        }
    }
}

/// A driver loop running connections, registered for the signal thread ([`driver_loop`]):
/// it polls [`asked`](Self::asked) every turn, and once asked, aborts every connection it
/// holds with RST, writes the RSTs into its device and [`answer`](Self::answer)s. Dropped
/// (the loop ended) it is no longer waited for.
#[derive(Debug)]
#[must_use = "the loop is forgotten as soon as the guard drops"]
pub struct DriverLoop {
    id: u64,
    loops: &'static Loops,
}

impl std::fmt::Debug for Loops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loops")
            .field("asked", &self.asked.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Register a driver loop until the guard drops; `wake` ends its wait early (the driver's
/// `PacketIo::waker`), so it notices at once.
pub fn driver_loop(wake: Option<Wake>) -> DriverLoop {
    LOOPS.register(wake)
}

impl DriverLoop {
    /// The process was interrupted: abort every connection, write the RSTs, then
    /// [`answer`](Self::answer). One atomic load: cheap enough for every turn.
    pub fn asked(&self) -> bool {
        self.loops.asked.load(Ordering::Relaxed)
    }

    /// Tell the signal thread this loop aborted `aborted` connections and (`flushed`) wrote
    /// their RSTs into its device, then wait for the process to exit: the loop must not go
    /// on (print a report of a run cut short, return from `main` with another status) while
    /// the signal thread undoes and exits. Only once [`asked`](Self::asked), which only the
    /// signal thread of [`install`] sets.
    pub fn answer(self, aborted: usize, flushed: bool) -> ! {
        self.loops.leave(self.id, aborted, flushed);
        std::mem::forget(self);
        loop {
            std::thread::park();
        }
    }
}

impl Drop for DriverLoop {
    fn drop(&mut self) {
        self.loops.leave(self.id, 0, true);
    }
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
    use std::sync::atomic::AtomicUsize;

    /// A registry of this test's own: the process's is left to the tools (asking it would
    /// stop every other test's driver loops).
    fn loops() -> &'static Loops {
        Box::leak(Box::new(Loops::new()))
    }

    #[test]
    fn a_signal_waits_for_the_loops_to_answer_and_counts_their_connections() {
        let loops = loops();
        let woken = Arc::new(AtomicUsize::new(0));
        let (registered, ready) = std::sync::mpsc::channel();
        for aborted in [2, 1] {
            let (woken, registered) = (woken.clone(), registered.clone());
            // Answering parks the thread for good (the process would exit): left behind.
            std::thread::spawn(move || {
                let wake: Wake = Arc::new(move || {
                    woken.fetch_add(1, Ordering::SeqCst);
                });
                let l = loops.register(Some(wake));
                let _ = registered.send(());
                while !l.asked() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                l.answer(aborted, true);
            });
        }
        for _ in 0..2 {
            ready.recv().expect("a loop registered");
        }
        // A loop that ended before the signal is not waited for.
        drop(loops.register(None));
        let start = Instant::now();
        let a = loops.abort_all(Duration::from_secs(20));
        assert!(start.elapsed() < Duration::from_secs(20), "waited it out");
        assert_eq!(woken.load(Ordering::SeqCst), 2, "each loop woken once");
        let want = Aborted {
            connections: 3,
            unflushed: 0,
            silent: 0,
        };
        assert_eq!(a, want);
        assert_eq!(
            a.describe(LOOPS_WAIT).as_deref(),
            Some("aborted 3 connections with RST")
        );
        // Registered after the signal: asked from the start.
        let late = loops.register(None);
        assert!(late.asked());
    }

    #[test]
    fn a_loop_that_never_answers_keeps_the_signal_waiting_only_until_the_limit() {
        let loops = loops();
        let stuck = loops.register(None);
        let start = Instant::now();
        let a = loops.abort_all(Duration::from_millis(100));
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(100), "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert_eq!(
            a,
            Aborted {
                connections: 0,
                unflushed: 0,
                silent: 1
            }
        );
        assert_eq!(
            a.describe(Duration::from_millis(100)).as_deref(),
            Some("1 driver loop did not answer within 100ms (their connections got no RST)")
        );
        drop(stuck);
    }

    #[test]
    fn nothing_to_abort_says_nothing_and_a_failed_flush_says_so() {
        let quiet = Aborted {
            connections: 0,
            unflushed: 0,
            silent: 0,
        };
        assert_eq!(quiet.describe(LOOPS_WAIT), None);
        assert_eq!(loops().abort_all(Duration::from_secs(20)), quiet);
        let failed = Aborted {
            connections: 1,
            unflushed: 1,
            silent: 0,
        };
        assert_eq!(
            failed.describe(LOOPS_WAIT).as_deref(),
            Some(
                "aborted 1 connection with RST; the RSTs of 1 connection may not have left \
                 (data path error)"
            )
        );
    }

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
