//! CPU time of the whole machine over a run, from `/proc/stat`: both sides, the relay, the
//! kernel's softirq and interrupt work, everything. Per-thread figures
//! (`getrusage(RUSAGE_THREAD)`) miss what the kernel does outside the stacks' threads (veth
//! forwarding, TCP receive in softirq for kernel TCP, TUN queueing), which is most of kernel
//! TCP's cost; this count has it for every stack alike. It also has whatever else runs on
//! the machine, which is why the results say what else ran.

use serde::Serialize;
use std::io;

/// One reading of the aggregate `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMark {
    /// user + nice + system + irq + softirq: time some CPU did work (idle, iowait and steal,
    /// time taken by the hypervisor, are not ours).
    busy: u64,
    softirq: u64,
}

/// Machine-wide CPU seconds between two readings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MachineCpu {
    /// Every CPU's busy time, softirq included.
    pub busy_s: f64,
    /// Of it, softirq time (network receive and transmit processing outside any thread).
    pub softirq_s: f64,
}

impl CpuMark {
    /// Reads `/proc/stat` now.
    pub fn now() -> io::Result<CpuMark> {
        CpuMark::parse(&std::fs::read_to_string("/proc/stat")?)
            .ok_or_else(|| io::Error::other("/proc/stat: no aggregate cpu line"))
    }

    /// The aggregate `cpu` line of a `/proc/stat` text.
    fn parse(stat: &str) -> Option<CpuMark> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal ...
        let field = |i: usize| v.get(i).copied();
        let (user, nice, system) = (field(0)?, field(1)?, field(2)?);
        let (irq, softirq) = (field(5)?, field(6)?);
        Some(CpuMark {
            busy: user + nice + system + irq + softirq,
            softirq,
        })
    }

    /// Seconds of CPU the machine spent from `self` to `later`.
    pub fn until(self, later: CpuMark) -> MachineCpu {
        // SAFETY: sysconf has no memory effects.
        let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
            n if n > 0 => n as f64,
            _ => 100.0,
        };
        let ticks = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz;
        MachineCpu {
            busy_s: ticks(self.busy, later.busy),
            softirq_s: ticks(self.softirq, later.softirq),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_aggregate_line_and_subtracts() {
        let a =
            CpuMark::parse("cpu  100 5 50 1000 7 3 12 9 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n").unwrap();
        assert_eq!(
            a,
            CpuMark {
                busy: 170,
                softirq: 12
            }
        );
        let b = CpuMark::parse("cpu  200 5 80 1900 7 3 32 99 0 0\n").unwrap();
        let d = a.until(b);
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        assert!((d.busy_s - 150.0 / hz).abs() < 1e-9, "{d:?}");
        assert!((d.softirq_s - 20.0 / hz).abs() < 1e-9, "{d:?}");
        assert!(CpuMark::parse("intr 1 2 3\n").is_none());
        assert!(CpuMark::parse("cpu  1 2 x\n").is_none());
    }

    #[test]
    fn this_machine_counts_work() {
        let a = CpuMark::now().unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 120 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let d = a.until(CpuMark::now().unwrap());
        assert!(d.busy_s >= 0.05, "{d:?}");
    }
}
