//! Where the threads of a run through the relay execute. The relay stands for the network
//! between two hosts, which in a real fabric costs the hosts no CPU; on this 2-core machine it
//! is a third busy thread, and left to the scheduler it shares the cores with both stacks'
//! threads in patterns that change from run to run (`docs/results.md`, "Pinning the relay").
//! So a run through the relay can give the relay thread a core of its own (the last CPU the
//! calling thread may use) and every thread the caller spawns afterwards the others: threads
//! inherit their creator's CPU mask, so both stacks' threads, the kernel's and ours, and the
//! ceiling's land on the same cores. [`Pinned`] restores the caller's mask when dropped. With
//! fewer than two CPUs nothing is pinned.
//!
//! What runs where is not the same for both stacks: a TUN write hands the packet to the
//! kernel's receive path in the writer's own system call, so the relay's writes run, on the
//! relay's core, the forwarding into the next namespace and, for kernel TCP, whose sockets
//! sit on the relay's devices, its whole receive processing (ACKs, out-of-order queue, the
//! sends an ACK releases); ours does its TCP work in its own threads, on the stacks' cores.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use serde::Serialize;
use std::io;
use std::marker::PhantomData;

/// Which cores a pinned run used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinnedCpus {
    /// The relay thread's core.
    pub relay_cpu: usize,
    /// The cores left to the calling thread and the threads it spawned.
    pub stack_cpus: Vec<usize>,
}

impl PinnedCpus {
    /// What `bth-compare` and `bth-perf` print about it.
    pub fn describe(&self) -> String {
        let cpus: Vec<String> = self.stack_cpus.iter().map(|c| c.to_string()).collect();
        format!(
            "relay thread on CPU {}, the stacks' threads on CPU {}",
            self.relay_cpu,
            cpus.join(",")
        )
    }
}

/// The calling thread's CPU mask while a relay run is pinned; dropping it restores the mask
/// the thread had before. Not `Send`: the mask is the pinning thread's own.
#[derive(Debug)]
pub struct Pinned {
    saved: CpuSet,
    /// The relay's core and the stacks' cores this pinning chose (also [`Pinned::cpus`]).
    pub cpus: PinnedCpus,
    _not_send: PhantomData<*const ()>,
}

impl Pinned {
    /// The cores this pinning used (for a run's record).
    pub fn cpus(&self) -> PinnedCpus {
        self.cpus.clone()
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Err(e) = sched_setaffinity(Pid::from_raw(0), &self.saved) {
            // Every later run would be pinned without a word otherwise.
            eprintln!("warning: could not restore this thread's CPU mask after a pinned run: {e}");
        }
    }
}

/// The CPUs the calling thread may run on, in order (`sched_getaffinity`: the mask, not a
/// cgroup's CPU quota).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(io::Error::from)?;
    Ok(cpus_of(&set))
}

fn cpus_of(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

fn set_of(cpus: &[usize]) -> io::Result<CpuSet> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c).map_err(io::Error::from)?;
    }
    Ok(set)
}

/// Split the CPUs `allowed` into the relay's (the last) and the rest; None with fewer than two.
pub fn split(allowed: &[usize]) -> Option<PinnedCpus> {
    let (&relay_cpu, rest) = allowed.split_last()?;
    (!rest.is_empty()).then(|| PinnedCpus {
        relay_cpu,
        stack_cpus: rest.to_vec(),
    })
}

/// Pin the calling thread to all but the last CPU it may use and thread `relay` (a thread id
/// of this process) to that last one; None (nothing changed) with fewer than two CPUs. On an
/// error nothing stays changed for the caller (the guard is made first).
pub fn pin(relay: Pid) -> io::Result<Option<Pinned>> {
    let me = Pid::from_raw(0);
    let saved = sched_getaffinity(me).map_err(io::Error::from)?;
    let Some(cpus) = split(&cpus_of(&saved)) else {
        return Ok(None);
    };
    let pinned = Pinned {
        saved,
        cpus,
        _not_send: PhantomData,
    };
    sched_setaffinity(me, &set_of(&pinned.cpus.stack_cpus)?).map_err(io::Error::from)?;
    sched_setaffinity(relay, &set_of(&[pinned.cpus.relay_cpu])?).map_err(|e| {
        io::Error::new(io::Error::from(e).kind(), format!("pinning the relay: {e}"))
    })?;
    Ok(Some(pinned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_takes_the_last_cpu_and_one_cpu_pins_nothing() {
        let cpus = |relay_cpu, stack_cpus: &[usize]| PinnedCpus {
            relay_cpu,
            stack_cpus: stack_cpus.to_vec(),
        };
        assert_eq!(split(&[0, 1]), Some(cpus(1, &[0])));
        assert_eq!(split(&[0, 2, 5, 7]), Some(cpus(7, &[0, 2, 5])));
        assert_eq!(split(&[3]), None);
        assert_eq!(split(&[]), None);
        assert_eq!(
            cpus(7, &[0, 2]).describe(),
            "relay thread on CPU 7, the stacks' threads on CPU 0,2"
        );
    }

    /// A thread pinned to its own core runs there; the caller gets the other cores, a thread
    /// it spawns then inherits them, and the guard gives the caller its old mask back.
    #[test]
    fn pinning_moves_the_relay_and_the_caller_and_the_guard_restores_the_caller() {
        let me = Pid::from_raw(0);
        let before = allowed_cpus().unwrap();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let relay = std::thread::spawn(move || {
            tid_tx.send(nix::unistd::gettid()).unwrap();
            let _ = stop_rx.recv();
            cpus_of(&sched_getaffinity(me).unwrap())
        });
        let tid = tid_rx.recv().unwrap();
        let pinned = pin(tid).expect("pin");
        let want = split(&before);
        assert_eq!(pinned.as_ref().map(Pinned::cpus), want);
        if let Some(w) = &want {
            assert_eq!(allowed_cpus().unwrap(), w.stack_cpus);
            let child = std::thread::spawn(|| allowed_cpus().unwrap());
            assert_eq!(child.join().unwrap(), w.stack_cpus);
        }
        stop_tx.send(()).unwrap();
        let relay_cpus = relay.join().unwrap();
        if let Some(w) = &want {
            assert_eq!(relay_cpus, [w.relay_cpu]);
        }
        drop(pinned);
        assert_eq!(allowed_cpus().unwrap(), before);
    }
}
