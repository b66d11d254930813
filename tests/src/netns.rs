//! Network namespaces for tests: unique names per run, always removed (Drop). Whether the
//! process may create them is the test harness's question (`crate::gate`).

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A namespace created with `ip netns add`, deleted when dropped (also on panic).
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> std::io::Result<Netns> {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("bth-{tag}-{}-{n}", std::process::id());
        run(&["ip", "netns", "add", &name])?;
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Run a command inside the namespace.
    pub fn exec(&self, args: &[&str]) -> std::io::Result<()> {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        run(&full)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Run a command; its stderr in the error when it fails.
pub fn run(args: &[&str]) -> std::io::Result<()> {
    let out = Command::new(args[0]).args(&args[1..]).output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}
