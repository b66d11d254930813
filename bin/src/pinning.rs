//! Where the threads of a run through the relay execute. The relay stands for the network
//! between two hosts, which in a real fabric costs the hosts no CPU; on this 2-core machine it
//! is a third busy thread, and left to the scheduler it shares the cores with both stacks'
//! threads in patterns that change from run to run (`docs/results.md`, "Pinning the relay").
//! So a run through the relay can give the relay thread a core of its own (the last CPU the
//! calling thread may use) and every thread the caller spawns afterwards the others: threads
//! inherit their creator's CPU mask, so both stacks' threads, the kernel's and ours, and the
//! ceiling's land on the same cores. [`Pinned`] restores the caller's mask when dropped. With
//! fewer than two CPUs nothing is pinned.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::io;
use std::marker::PhantomData;

/// The calling thread's CPU mask while a relay run is pinned; dropping it restores the mask
/// the thread had before. Not `Send`: the mask is the pinning thread's own.
#[derive(Debug)]
pub struct Pinned {
    saved: CpuSet,
    /// The relay thread's core.
    pub relay_cpu: usize,
    /// The cores left to the calling thread and the threads it spawns.
    pub stack_cpus: Vec<usize>,
    _not_send: PhantomData<*const ()>,
}

impl Pinned {
    /// What `bth-compare` and `bth-perf` say about it.
    pub fn describe(&self) -> String {
        let cpus: Vec<String> = self.stack_cpus.iter().map(|c| c.to_string()).collect();
        format!(
            "relay thread on CPU {}, the stacks' threads on CPU {}",
            self.relay_cpu,
            cpus.join(",")
        )
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = sched_setaffinity(Pid::from_raw(0), &self.saved);
    }
}

/// The CPUs in `set`, in order.
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
pub fn split(allowed: &[usize]) -> Option<(usize, Vec<usize>)> {
    let (&relay, rest) = allowed.split_last()?;
    (!rest.is_empty()).then(|| (relay, rest.to_vec()))
}

/// Pin thread `relay` (a thread id of this process) to the last CPU the calling thread may use
/// and the calling thread to the others; None (nothing changed) with fewer than two CPUs.
pub fn pin(relay: Pid) -> io::Result<Option<Pinned>> {
    let me = Pid::from_raw(0);
    let saved = sched_getaffinity(me).map_err(io::Error::from)?;
    let Some((relay_cpu, stack_cpus)) = split(&cpus_of(&saved)) else {
        return Ok(None);
    };
    sched_setaffinity(relay, &set_of(&[relay_cpu])?).map_err(|e| {
        io::Error::new(io::Error::from(e).kind(), format!("pinning the relay: {e}"))
    })?;
    let pinned = Pinned {
        saved,
        relay_cpu,
        stack_cpus,
        _not_send: PhantomData,
    };
    sched_setaffinity(me, &set_of(&pinned.stack_cpus)?).map_err(io::Error::from)?;
    Ok(Some(pinned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_takes_the_last_cpu_and_one_cpu_pins_nothing() {
        assert_eq!(split(&[0, 1]), Some((1, vec![0])));
        assert_eq!(split(&[0, 2, 5, 7]), Some((7, vec![0, 2, 5])));
        assert_eq!(split(&[3]), None);
        assert_eq!(split(&[]), None);
    }

    /// A thread pinned to its own core runs there; the caller gets the other cores and its
    /// old mask back when the guard goes.
    #[test]
    fn pinning_moves_the_relay_and_the_caller_and_the_guard_restores_the_caller() {
        let me = Pid::from_raw(0);
        let before = cpus_of(&sched_getaffinity(me).unwrap());
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let relay = std::thread::spawn(move || {
            tid_tx.send(nix::unistd::gettid()).unwrap();
            let _ = stop_rx.recv();
            cpus_of(&sched_getaffinity(me).unwrap())
        });
        let tid = tid_rx.recv().unwrap();
        let pinned = pin(tid).expect("pin");
        match split(&before) {
            None => assert!(pinned.is_none(), "one CPU: nothing pinned"),
            Some((r, rest)) => {
                let p = pinned.as_ref().expect("pinned");
                assert_eq!((p.relay_cpu, &p.stack_cpus), (r, &rest));
                assert_eq!(cpus_of(&sched_getaffinity(me).unwrap()), rest);
                // A thread spawned now inherits the stacks' cores.
                let child = std::thread::spawn(move || cpus_of(&sched_getaffinity(me).unwrap()));
                assert_eq!(child.join().unwrap(), rest);
                assert!(
                    p.describe().contains(&format!("CPU {r}")),
                    "{}",
                    p.describe()
                );
            }
        }
        stop_tx.send(()).unwrap();
        let relay_cpus = relay.join().unwrap();
        if let Some((r, _)) = split(&before) {
            assert_eq!(relay_cpus, [r]);
        }
        drop(pinned);
        assert_eq!(cpus_of(&sched_getaffinity(me).unwrap()), before);
    }
}
