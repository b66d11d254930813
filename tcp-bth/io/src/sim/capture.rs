//! [`Tap`]s for the simulated pair (TCP segments) and net (IP packets) that write a pcap file
//! through `bth-capture`.

use super::link::Direction;
use super::pair::Tap;
use bth_capture::{CaptureHandle, PcapWriter};
use std::io::Write;
use std::time::Duration;
use tcp_bth::wire::IpPair;

/// A [`Tap`] for [`Pair`](super::Pair) writing every segment it sees to `writer`: direction A→B
/// uses `a_to_b`, B→A its reverse. Write errors cannot be returned from a tap: after the first
/// one the tap stops writing; the [`CaptureHandle`] flushes the capture and returns that error
/// once the run is over.
pub fn pcap_tap<W: Write + Send + 'static>(
    writer: PcapWriter<W>,
    a_to_b: IpPair,
) -> (Tap, CaptureHandle<W>) {
    let (w, handle) = writer.shared();
    let tap: Tap = Box::new(move |ts: Duration, dir: Direction, seg: &[u8]| {
        let ip = match dir {
            Direction::AtoB => a_to_b,
            Direction::BtoA => a_to_b.reversed(),
        };
        w.write_tcp(ts, ip, seg);
    });
    (tap, handle)
}

/// A [`Tap`] for [`Net`](super::Net), which sees whole IP packets: each is written with its
/// own addresses (the writer rebuilds the same IP header). A packet that is not TCP over IPv4
/// or IPv6 is skipped, never a panic: a tap must not fail the run it watches.
pub fn pcap_ip_tap<W: Write + Send + 'static>(writer: PcapWriter<W>) -> (Tap, CaptureHandle<W>) {
    let (w, handle) = writer.shared();
    let tap: Tap = Box::new(move |ts: Duration, _: Direction, packet: &[u8]| {
        if let Some((ip, seg)) = tcp_of(packet) {
            w.write_tcp(ts, ip, seg);
        }
    });
    (tap, handle)
}

/// The address pair and TCP segment of an IP packet, if it is one.
fn tcp_of(packet: &[u8]) -> Option<(IpPair, &[u8])> {
    let ip = etherparse::IpSlice::from_slice(packet).ok()?;
    let pair = match &ip {
        etherparse::IpSlice::Ipv4(v4) => IpPair::V4 {
            src: v4.header().source(),
            dst: v4.header().destination(),
        },
        etherparse::IpSlice::Ipv6(v6) => IpPair::V6 {
            src: v6.header().source(),
            dst: v6.header().destination(),
        },
    };
    let payload = ip.payload();
    (payload.ip_number == etherparse::IpNumber::TCP && !ip.is_fragmenting_payload())
        .then_some((pair, payload.payload))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bth_capture::{analyze, CaptureReader};
    use std::sync::{Arc, Mutex};
    use tcp_bth::wire::{TcpFlags, TcpOptions, TcpRepr};

    const V4: IpPair = IpPair::V4 {
        src: [192, 0, 2, 1],
        dst: [192, 0, 2, 2],
    };

    fn segment(ip: IpPair, payload: &[u8]) -> Vec<u8> {
        TcpRepr {
            src_port: 1000,
            dst_port: 2000,
            seq: 1,
            ack: 9,
            flags: TcpFlags::ACK,
            window: 100,
            urgent: 0,
            options: TcpOptions::default(),
            payload,
        }
        .to_vec(ip)
        .unwrap()
    }

    #[test]
    fn tap_writes_both_directions() {
        #[derive(Clone)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, d: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(d);
                Ok(d.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let a = segment(V4, b"a");
        let b = segment(V4.reversed(), b"b");
        let shared = Arc::new(Mutex::new(Vec::new()));
        let (mut tap, handle) = pcap_tap(PcapWriter::new(Sink(shared.clone())).unwrap(), V4);
        tap(Duration::from_millis(1), Direction::AtoB, &a);
        tap(Duration::from_millis(2), Direction::BtoA, &b);
        assert_eq!(handle.finish().unwrap(), 2);
        let bytes = shared.lock().unwrap().clone();
        let an = analyze(CaptureReader::new(&bytes[..]).unwrap()).unwrap();
        assert_eq!(an.summary.checksum_errors, 0, "B->A uses the reversed pair");
        assert_eq!(an.flows.len(), 2);
    }
}
