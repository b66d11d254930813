//! tcpdump inside a network namespace, for the tests that read back a capture of real
//! traffic: the capture file, the running tcpdump, and what it said when stopped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A capture file and tcpdump's stderr beside it (`.stderr`), both removed when dropped (also
/// when a test fails).
pub struct CaptureFile(pub PathBuf);

impl Drop for CaptureFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(self.0.with_extension("stderr"));
    }
}

/// What tcpdump said it lost ("N packets dropped by kernel"), from its closing statistics.
fn dropped_by_kernel(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .find(|l| l.ends_with("packets dropped by kernel"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
}

/// tcpdump's closing statistics (`said`, what [`Tcpdump::stop`] returns) report a complete
/// capture: a capture tcpdump lost packets from cannot show every message, so say so rather
/// than fail on a count.
pub fn assert_complete(said: &str) {
    assert_eq!(
        dropped_by_kernel(said),
        Some(0),
        "tcpdump did not report a complete capture: {said}"
    );
}

/// tcpdump on a device inside a namespace, writing TCP packets to a file; stopped (the file
/// flushed and closed) by [`Tcpdump::stop`], or killed on drop.
pub struct Tcpdump {
    child: Child,
    stderr: PathBuf,
}

impl Tcpdump {
    /// Start it on `dev` in namespace `ns`, writing at most `snaplen` bytes of each TCP packet
    /// to `file` (its stderr beside it, as [`CaptureFile`] has it), and return once it has the
    /// device open.
    pub fn start(ns: &str, dev: &str, file: &Path, snaplen: u32) -> Tcpdump {
        let stderr = file.with_extension("stderr");
        let child = Command::new("ip")
            // Immediate mode: libpcap would otherwise hold the last packets in its ring buffer
            // for up to a second, and they would be lost when tcpdump is stopped.
            .args([
                "netns",
                "exec",
                ns,
                "tcpdump",
                "--immediate-mode",
                "-B",
                "32768",
                "-i",
                dev,
                "-U",
                // In immediate mode libpcap's ring has one frame per packet, each as long as
                // the snapshot length: with `-s 0` (256 KiB) the 32 MiB buffer held 128
                // packets, and a burst longer than that was dropped ("packets dropped by
                // kernel") once the stack got fast enough to send one.
                "-s",
                &snaplen.to_string(),
                "-w",
            ])
            .arg(file)
            .arg("tcp")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("tcpdump");
        // tcpdump needs a moment to open the device before traffic starts.
        let t0 = Instant::now();
        while std::fs::metadata(file).map_or(true, |m| m.len() == 0)
            && t0.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        Tcpdump { child, stderr }
    }

    /// Let the last packets in, stop it with SIGTERM (it flushes and closes the file) and
    /// return what it said on stderr.
    pub fn stop(mut self) -> String {
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Tcpdump {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
