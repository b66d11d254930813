//! Sizes and times as people read them — 64 B, 4 KiB, 1 MiB, 9000 B, 45 µs, 2.17 ms — for
//! every chart axis and table column of `bth-compare` and every figure of `bth-perf` that shows
//! one (message sizes, MTUs, bytes held or in flight, latencies), never `1000000B`.

const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];

/// Below this, a size that is no whole number of KiB is written in bytes (`9000 B`,
/// `65000 B`): exact, and short enough to read.
const BYTES_UP_TO: u64 = 100_000;

/// `bytes` as people read sizes: a whole number of GiB, MiB or KiB in that unit (`4 KiB`,
/// `1 MiB`); one byte short of a whole number of MiB or GiB as such (`16 MiB − 1 B`, the
/// largest message); other sizes below 100,000 bytes in bytes (`1500 B`, `9000 B`); anything
/// else in the largest unit it reaches, to three significant digits (`977 KiB`, `1.43 MiB`).
pub fn human_size(bytes: u64) -> String {
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    for (unit, name) in &UNITS[..2] {
        let next = bytes.saturating_add(1);
        if next >= *unit && next.is_multiple_of(*unit) {
            return format!("{} {name} − 1 B", next / unit);
        }
    }
    if bytes < BYTES_UP_TO {
        return format!("{bytes} B");
    }
    let (unit, name) = UNITS
        .into_iter()
        .find(|&(u, _)| bytes >= u)
        .unwrap_or((1, "B"));
    let v = bytes as f64 / unit as f64;
    match v {
        v if v >= 100.0 => format!("{v:.0} {name}"),
        v if v >= 10.0 => format!("{v:.1} {name}"),
        v => format!("{v:.2} {name}"),
    }
}

/// An amount of data measured rather than chosen (bytes held, in flight): one decimal in
/// KiB or MiB (`1.3 MiB`, `859.5 KiB`), bytes below 1 KiB.
pub fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// A time in microseconds as people read it: `45 µs`, `2.17 ms`, `105.5 ms`.
pub fn micros(us: f64) -> String {
    match us {
        us if us >= 10_000.0 => format!("{:.1} ms", us / 1000.0),
        us if us >= 1000.0 => format!("{:.2} ms", us / 1000.0),
        us => format!("{us:.0} µs"),
    }
}

/// [`human_size`] of a chart coordinate (sizes are drawn as `f64`).
pub fn human_size_f64(v: f64) -> String {
    if v.is_finite() && v >= 0.0 {
        human_size(v.round() as u64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_read_them() {
        for (b, want) in [
            (0, "0 B"),
            (64, "64 B"),
            (576, "576 B"),
            (1500, "1500 B"),
            (4096, "4 KiB"),
            (9000, "9000 B"),
            (65_000, "65000 B"),
            (65_535, "65535 B"),
            (65_536, "64 KiB"),
            (1 << 20, "1 MiB"),
            (tcp_bth::wire::MAX_MESSAGE_LEN as u64, "16 MiB − 1 B"),
            (3 << 30, "3 GiB"),
            (1_000_000, "977 KiB"),
            (1_500_000, "1.43 MiB"),
            (150_000_000, "143 MiB"),
            (20_000_000, "19.1 MiB"),
        ] {
            assert_eq!(human_size(b), want, "{b}");
        }
        assert_eq!(human_size_f64(4096.0), "4 KiB");
        assert_eq!(human_size_f64(999_999.6), "977 KiB");
        assert_eq!(human_size_f64(f64::NAN), "NaN");
        // Never bytes with no space and no unit, as plotters' own labels would be.
        for b in [1_000_000u64, 10_000_000, 100_000_000] {
            assert!(!human_size(b).ends_with("0B"), "{}", human_size(b));
        }
    }
}
