//! Writing: TCP segments, wrapped in IP headers, to a libpcap file.

use super::LINKTYPE_RAW;
use bth_wire::IpPair;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Snap length written in the file header: more than any IPv4 packet or jumbo-free IPv6 one.
pub const SNAPLEN: u32 = 262_144;
/// TTL / hop limit of the IP headers [`PcapWriter`] builds.
pub const TTL: u8 = 64;

/// Writes TCP segments to a libpcap file (link type RAW, nanosecond timestamps, host byte
/// order), each wrapped in an IPv4 header (TTL 64, DF, correct total length and header
/// checksum, incrementing identification) or an IPv6 header (hop limit 64), according to the
/// [`IpPair`] given.
///
/// Output is buffered; it is flushed by [`flush`](Self::flush), [`finish`](Self::finish), or
/// on drop (where a write error can no longer be reported).
pub struct PcapWriter<W: Write> {
    out: BufWriter<W>,
    ident: u16,
    packets: u64,
}

/// Magic of a nanosecond-resolution libpcap file, written in host byte order.
const PCAP_MAGIC_NANOS: u32 = 0xA1B2_3C4D;

impl PcapWriter<File> {
    /// Create (or truncate) `path` and write the pcap file header.
    pub fn create(path: impl AsRef<Path>) -> io::Result<PcapWriter<File>> {
        PcapWriter::new(File::create(path)?)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Write the pcap file header to `w`.
    pub fn new(w: W) -> io::Result<PcapWriter<W>> {
        let mut out = BufWriter::with_capacity(256 * 1024, w);
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&PCAP_MAGIC_NANOS.to_ne_bytes());
        h.extend_from_slice(&2u16.to_ne_bytes()); // version 2.4
        h.extend_from_slice(&4u16.to_ne_bytes());
        h.extend_from_slice(&0i32.to_ne_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_ne_bytes()); // sigfigs
        h.extend_from_slice(&SNAPLEN.to_ne_bytes());
        h.extend_from_slice(&LINKTYPE_RAW.to_ne_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            ident: 0,
            packets: 0,
        })
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Write one TCP segment (header + payload, checksum already computed over `ip`) at time
    /// `ts`, inside an IP header for `ip`. Refuses a segment too large for one IP packet and a
    /// time past the year 2106 (pcap seconds are 32-bit).
    pub fn write_tcp(&mut self, ts: Duration, ip: IpPair, tcp_segment: &[u8]) -> io::Result<()> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        let too_big = || {
            invalid(format!(
                "TCP segment of {} bytes does not fit one IP packet",
                tcp_segment.len()
            ))
        };
        let secs = u32::try_from(ts.as_secs())
            .map_err(|_| invalid(format!("timestamp {ts:?} does not fit a pcap record")))?;
        let len = u16::try_from(tcp_segment.len()).map_err(|_| too_big())?;
        let mut pkt = Vec::with_capacity(16 + 40 + tcp_segment.len());
        pkt.resize(16, 0); // record header, filled below
        match ip {
            IpPair::V4 { src, dst } => {
                let mut h =
                    etherparse::Ipv4Header::new(len, TTL, etherparse::IpNumber::TCP, src, dst)
                        .map_err(|_| too_big())?;
                h.dont_fragment = true;
                h.identification = self.ident;
                self.ident = self.ident.wrapping_add(1);
                h.header_checksum = h.calc_header_checksum();
                pkt.extend_from_slice(&h.to_bytes());
            }
            IpPair::V6 { src, dst } => {
                let h = etherparse::Ipv6Header {
                    traffic_class: 0,
                    flow_label: Default::default(),
                    payload_length: len,
                    next_header: etherparse::IpNumber::TCP,
                    hop_limit: TTL,
                    source: src,
                    destination: dst,
                };
                pkt.extend_from_slice(&h.to_bytes());
            }
        }
        pkt.extend_from_slice(tcp_segment);
        let caplen = (pkt.len() - 16) as u32; // at most 40 + 65535
        pkt[0..4].copy_from_slice(&secs.to_ne_bytes());
        pkt[4..8].copy_from_slice(&ts.subsec_nanos().to_ne_bytes());
        pkt[8..12].copy_from_slice(&caplen.to_ne_bytes());
        pkt[12..16].copy_from_slice(&caplen.to_ne_bytes());
        self.out.write_all(&pkt)?;
        self.packets += 1;
        Ok(())
    }

    /// Push buffered packets to the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flush and return the underlying writer.
    pub fn finish(self) -> io::Result<W> {
        self.out.into_inner().map_err(|e| e.into_error())
    }

    /// Share this writer between a packet callback, which cannot return errors, and whoever
    /// finishes the capture: the [`SharedWriter`] writes segments, the [`CaptureHandle`] flushes
    /// and collects the first write error once the run is over. After the first error the
    /// shared writer stops writing. (`bth_io::sim::pcap_tap` builds the simulated pair's
    /// tap on this.)
    pub fn shared(self) -> (SharedWriter<W>, CaptureHandle<W>) {
        let shared = Arc::new(Mutex::new(Shared {
            writer: Some(self),
            error: None,
        }));
        let handle = CaptureHandle {
            shared: Arc::clone(&shared),
        };
        (SharedWriter { shared }, handle)
    }
}

/// The writing end of a [`PcapWriter::shared`].
pub struct SharedWriter<W: Write> {
    shared: Arc<Mutex<Shared<W>>>,
}

impl<W: Write> SharedWriter<W> {
    /// [`PcapWriter::write_tcp`], with the error kept for [`CaptureHandle::finish`]: after the
    /// first one, and after the capture is finished, nothing more is written.
    pub fn write_tcp(&self, ts: Duration, ip: IpPair, tcp_segment: &[u8]) {
        let Ok(mut s) = self.shared.lock() else {
            return;
        };
        if s.error.is_some() {
            return;
        }
        let r = match s.writer.as_mut() {
            Some(w) => w.write_tcp(ts, ip, tcp_segment),
            None => return,
        };
        if let Err(e) = r {
            s.error = Some(e);
        }
    }
}

struct Shared<W: Write> {
    writer: Option<PcapWriter<W>>,
    error: Option<io::Error>,
}

/// The finishing end of a [`PcapWriter::shared`].
pub struct CaptureHandle<W: Write> {
    shared: Arc<Mutex<Shared<W>>>,
}

impl<W: Write> CaptureHandle<W> {
    /// Flush and close the capture; returns the packets written, or the first write error.
    /// The [`SharedWriter`] writes nothing after this.
    pub fn finish(&self) -> io::Result<u64> {
        let mut s = self
            .shared
            .lock()
            .map_err(|_| io::Error::other("capture tap panicked"))?;
        if let Some(e) = s.error.take() {
            s.writer = None;
            return Err(e);
        }
        match s.writer.take() {
            Some(w) => {
                let n = w.packets();
                w.finish()?;
                Ok(n)
            }
            None => Err(io::Error::other("capture already finished")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{segment, send, write, V4};
    use crate::{analyze, CaptureReader, RawPacket};
    use bth_wire::Opcode;

    #[test]
    fn writer_builds_a_correct_ipv4_header() {
        let seg = segment(V4, 1, Some(send(0, Opcode::SendOnly, 0)), b"payload");
        let file = write(&[(V4, seg.clone()), (V4, seg.clone())]);
        assert_eq!(file[..4], 0xA1B2_3C4Du32.to_ne_bytes());
        assert_eq!(file[20..24], LINKTYPE_RAW.to_ne_bytes());
        let pkts: Vec<RawPacket> = CaptureReader::new(&file[..])
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(pkts.len(), 2);
        assert_eq!(pkts[1].ts, Duration::new(1, 1007));
        let (h, rest) = etherparse::Ipv4Header::from_slice(&pkts[0].data).unwrap();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        assert_eq!(
            (h.time_to_live, h.protocol, h.dont_fragment),
            (64, etherparse::IpNumber::TCP, true)
        );
        assert_eq!(usize::from(h.total_len), 20 + seg.len());
        assert_eq!(rest, &seg[..]);
        let (h2, _) = etherparse::Ipv4Header::from_slice(&pkts[1].data).unwrap();
        assert_eq!(h2.identification, h.identification.wrapping_add(1));
    }

    #[test]
    fn writer_refuses_what_does_not_fit() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let e = w
            .write_tcp(Duration::ZERO, V4, &vec![0; 70_000])
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = w
            .write_tcp(Duration::from_secs(1 << 33), V4, &[0; 20])
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(w.packets(), 0);
    }

    #[test]
    fn shared_writer_writes_and_reports_errors() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Err(io::Error::other("disk full"))
            }
        }
        let a = segment(V4, 1, None, b"a");
        let b = segment(V4.reversed(), 1, None, b"b");
        let shared = Arc::new(Mutex::new(Vec::new()));
        #[derive(Clone)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, d: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(d);
                Ok(d.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (w, handle) = PcapWriter::new(Sink(shared.clone())).unwrap().shared();
        w.write_tcp(Duration::from_millis(1), V4, &a);
        w.write_tcp(Duration::from_millis(2), V4.reversed(), &b);
        assert_eq!(handle.finish().unwrap(), 2);
        let bytes = shared.lock().unwrap().clone();
        let an = analyze(CaptureReader::new(&bytes[..]).unwrap()).unwrap();
        assert_eq!(an.summary.checksum_errors, 0);
        assert_eq!(an.flows.len(), 2);

        // Buffered: the error surfaces at the latest when the handle flushes.
        let (w, handle) = PcapWriter::new(Full)
            .map_or_else(|_| panic!("header write is buffered"), |w| w.shared());
        w.write_tcp(Duration::ZERO, V4, &a);
        assert!(handle.finish().is_err());
    }
}
