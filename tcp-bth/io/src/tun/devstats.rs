//! Packets the kernel's network devices dropped, from `/proc/thread-self/net/dev`: the
//! devices of the calling thread's network namespace (a thread that entered a namespace with
//! [`enter_netns`](super::enter_netns) sees that namespace's devices there, where
//! `/proc/net/dev` would show the process's). A TUN device counts the packets its reader was
//! too slow for (its queue holds `txqueuelen` packets, 500 by default) as transmit drops; a
//! veth, the packets its peer's backlog refused.

use std::io;

const PROC_NET_DEV: &str = "/proc/thread-self/net/dev";

/// Receive and transmit drops of one device.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeviceDrops {
    /// Receive drops (the receive `drop` column).
    pub rx: u64,
    /// Transmit drops (the transmit `drop` column; for a TUN device, packets that found the
    /// queue to our reader full).
    pub tx: u64,
}

impl DeviceDrops {
    /// Receive and transmit drops together (saturating).
    pub fn total(self) -> u64 {
        self.rx.saturating_add(self.tx)
    }
}

/// The drops of device `name` in the calling thread's namespace.
pub fn device_drops(name: &str) -> io::Result<DeviceDrops> {
    let text = std::fs::read_to_string(PROC_NET_DEV)?;
    let found = parse(&text).find(|(dev, _)| *dev == name).map(|(_, d)| d);
    found.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no device {name} in {PROC_NET_DEV}"),
        )
    })
}

/// DeviceDrops of every device but `lo` in the calling thread's namespace, by device name.
pub fn namespace_drops() -> io::Result<Vec<(String, u64)>> {
    let text = std::fs::read_to_string(PROC_NET_DEV)?;
    Ok(parse(&text)
        .filter(|(dev, _)| *dev != "lo")
        .map(|(dev, d)| (dev.to_string(), d.total()))
        .collect())
}

/// What the devices dropped between two readings of [`namespace_drops`]: the differences of
/// the devices present in both. A device that came or went in between is left out (its
/// counters started or ended with it), so a device a run opened and closed is counted by
/// whoever owned it, and one a previous run left behind for a moment does not count against
/// this one.
pub fn drops_between(before: &[(String, u64)], after: &[(String, u64)]) -> u64 {
    after
        .iter()
        .filter_map(|(dev, a)| {
            let (_, b) = before.iter().find(|(d, _)| d == dev)?;
            Some(a.saturating_sub(*b))
        })
        .sum()
}

/// Each device line of `/proc/net/dev`: `name: rx bytes packets errs drop fifo frame
/// compressed multicast, tx bytes packets errs drop fifo colls carrier compressed`. Lines that
/// do not have that shape (the two header lines) are skipped.
fn parse(text: &str) -> impl Iterator<Item = (&str, DeviceDrops)> {
    text.lines().filter_map(|line| {
        let (name, rest) = line.split_once(':')?;
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        (f.len() == 16).then(|| {
            (
                name.trim(),
                DeviceDrops {
                    rx: f[3],
                    tx: f[11],
                },
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:   22455     205    0    0    0     0          0         0    22455     205    0    0    0     0       0          0
  tep0: 9876543   12000    0    7    0     0          0         0  1234567    9000    0  422    0     0       0          0
bthv0:     100       2    0    1    0     0          0         0      200       3    0    2    0     0       0          0
";

    #[test]
    fn drops_are_the_fourth_field_of_each_direction() {
        let all: Vec<_> = parse(SAMPLE).collect();
        assert_eq!(all.len(), 3, "header lines skipped");
        assert_eq!(all[1], ("tep0", DeviceDrops { rx: 7, tx: 422 }));
        assert_eq!(all[2].1.total(), 3);
    }

    #[test]
    fn this_threads_namespace_has_a_loopback_device() {
        // Every namespace has `lo`; reading needs no privilege.
        device_drops("lo").expect("lo");
        assert_eq!(
            device_drops("no-such-device").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        namespace_drops().expect("readable");
    }

    #[test]
    fn drops_between_counts_only_devices_present_in_both_readings() {
        let dev = |n: &str, d: u64| (n.to_string(), d);
        let before = [dev("bthv0", 10), dev("old-tun", 500)];
        let after = [dev("bthv0", 15), dev("new-tun", 40)];
        // bthv0 dropped 5; the device that went and the one that came are not counted.
        assert_eq!(drops_between(&before, &after), 5);
        // A counter that went back (a device re-created under the same name) adds nothing.
        assert_eq!(drops_between(&[dev("x", 9)], &[dev("x", 2)]), 0);
        assert_eq!(drops_between(&[], &after), 0);
    }
}
