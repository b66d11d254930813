//! Network namespaces for tests: unique names per run, always removed (Drop). Whether the
//! process may create them is the test harness's question (`bth_tests::gate`).

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A namespace created with `ip netns add`, deleted when dropped (also on panic).
pub struct Netns {
    /// The namespace's name as `ip netns` knows it: `bth-{tag}-{pid}-{n}`.
    pub name: String,
}

impl Netns {
    /// Create namespace `bth-{tag}-{pid}-{n}` (unique per process and call) and bring its
    /// loopback up. Needs root (CAP_SYS_ADMIN) and `ip` from iproute2.
    pub fn new(tag: &str) -> std::io::Result<Netns> {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("bth-{tag}-{}-{n}", std::process::id());
        crate::topology::ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Run a command inside the namespace.
    pub fn exec(&self, args: &[&str]) -> std::io::Result<()> {
        crate::topology::in_ns(&self.name, args)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Accepts one connection on `l` within `limit`: a peer that never connects fails the test
/// with `TimedOut` instead of hanging it (a blocking `accept` has no timeout of its own). The
/// stream is handed back blocking, as `accept` gives it.
pub fn accept_within(
    l: &std::net::TcpListener,
    limit: std::time::Duration,
) -> std::io::Result<std::net::TcpStream> {
    l.set_nonblocking(true)?;
    let deadline = std::time::Instant::now() + limit;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no connection within {limit:?}"),
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::accept_within;
    use std::io::ErrorKind;
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    #[test]
    fn accept_within_gives_up_and_then_accepts_blocking() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let t0 = Instant::now();
        let e = accept_within(&l, Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert!(t0.elapsed() >= Duration::from_millis(50));
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let s = accept_within(&l, Duration::from_secs(5)).unwrap();
        // Handed back blocking: a read with a timeout waits instead of failing at once.
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut b = [0u8; 1];
        let e = std::io::Read::read(&mut &s, &mut b).unwrap_err();
        assert!(matches!(
            e.kind(),
            ErrorKind::WouldBlock | ErrorKind::TimedOut
        ));
        assert!(t0.elapsed() >= Duration::from_millis(70));
    }
}
