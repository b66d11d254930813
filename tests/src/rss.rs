//! Resident set size of this process, for the memory checks of the soak and SYN-flood tests.
//!
//! Process-wide RSS only means something when nothing else allocates in the process: the tests
//! that use it are alone in their test binaries (`tests/tests/soak.rs`,
//! `tests/tests/syn_flood_memory.rs`).

use std::fmt;

/// Where the resident set size is read from (second field, in pages).
const STATM: &str = "/proc/self/statm";

/// Why the resident set size could not be measured. `Debug` prints the same sentence as
/// `Display`, so `.expect()` in a test shows it as is.
pub enum RssError {
    /// `/proc/self/statm` could not be read (no procfs?).
    Read(std::io::Error),
    /// `/proc/self/statm` did not hold a resident page count in its second field.
    Parse(String),
    /// `sysconf(_SC_PAGESIZE)` failed.
    PageSize,
}

impl fmt::Display for RssError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RssError::Read(e) => write!(f, "cannot read {STATM}: {e}"),
            RssError::Parse(s) => write!(f, "no resident page count in {STATM}: {s:?}"),
            RssError::PageSize => write!(f, "sysconf(_SC_PAGESIZE) failed"),
        }
    }
}

impl fmt::Debug for RssError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for RssError {}

/// The page size in bytes, from `sysconf(_SC_PAGESIZE)`.
pub fn page_size() -> Result<u64, RssError> {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        Ok(n as u64)
    } else {
        Err(RssError::PageSize)
    }
}

/// Resident set size of this process in bytes: the resident page count of `/proc/self/statm`
/// times the page size. An error (never a zero) when it cannot be measured, so callers can
/// `.expect()` it and a memory check fails instead of passing on nothing.
pub fn rss_bytes() -> Result<u64, RssError> {
    let s = std::fs::read_to_string(STATM).map_err(RssError::Read)?;
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| RssError::Parse(s.clone()))?;
    Ok(pages * page_size()?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rss_is_measured_and_plausible() {
        let ps = super::page_size().unwrap();
        assert!(ps.is_power_of_two() && ps >= 4096, "page size {ps}");
        let rss = super::rss_bytes().unwrap();
        // A running test binary has at least a few pages resident and fewer than 64 GiB.
        assert!(rss >= 16 * ps && rss < 64 << 30, "rss {rss}");
        assert_eq!(rss % ps, 0);
    }
}
