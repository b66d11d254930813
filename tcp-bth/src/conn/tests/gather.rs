//! Segments built for a caller that gathers (`Endpoint::poll_transmit_gather`, the TUN driver's
//! `writev`): the header in the caller's buffer and the payload as slices of the
//! application's buffer. On the wire they are byte for byte what `poll_transmit_into` builds
//! (same header, same ICRC, same checksum, whole or partial), every payload byte is counted
//! once, copied or gathered, and a payload outside the caller's limits is copied.

use super::*;
use crate::conn::GatherLimits;
use crate::conn::Sge;
use crate::wire::ChecksumFill;
use bth_placement::{Access, WcStatus};

/// What the endpoint hands a connection for a driver that gathers.
fn out<'a>(
    buf: &'a mut [u8],
    fill: ChecksumFill,
    parts: &'a mut Vec<Bytes>,
    limits: GatherLimits,
) -> crate::conn::Out<'a> {
    crate::conn::Out {
        buf,
        fill,
        gather: Some(crate::conn::Gather { parts, limits }),
    }
}

/// Established, with a receive posted on B and its credit at A.
fn ready() -> BackToBack {
    let mut d = established(true);
    d.b.post_recv(1, vec![0; 20_000]).unwrap();
    d.settle(10 * MS);
    d
}

/// One SEND in four posted buffers of 3,000, 1, 4,000 and 5,000 bytes: one segment spans the
/// first three (three slices), one the last boundary (two), the last one is short.
fn send(c: &mut Connection) -> Vec<u8> {
    let chunks = [
        pattern(1, 3000),
        pattern(2, 1),
        pattern(3, 4000),
        pattern(4, 5000),
    ];
    let all = chunks.concat();
    c.post_send(WorkRequest {
        wr_id: 9,
        op: WrOp::Send { imm: None },
        sg_list: chunks.into_iter().map(Bytes::from).collect(),
    })
    .unwrap();
    all
}

#[test]
fn gathered_segments_are_the_copied_ones_byte_for_byte_within_the_callers_limits() {
    let limits = GatherLimits {
        max_parts: 2,
        min_payload: 1000,
        gso_payload: 0,
    };
    for fill in [ChecksumFill::Full, ChecksumFill::Partial] {
        let (mut copied, mut gathered) = (ready(), ready());
        let want = send(&mut copied.a);
        assert_eq!(send(&mut gathered.a), want);
        let now = copied.now;
        assert_eq!(gathered.now, now);
        let len = copied.a.max_segment_len();
        let (mut buf, mut hdr, mut parts) = (vec![0u8; len], vec![0u8; len], Vec::new());
        // Each payload: (gathered, shorter than the limit, slices gathered).
        let mut seen = Vec::new();
        while let Some(n) = copied.a.poll_transmit_into(now, &mut buf, fill) {
            let h = gathered
                .a
                .poll_transmit_out(now, out(&mut hdr, fill, &mut parts, limits))
                .expect("the twin has the same segment");
            let mut seg = hdr[..h].to_vec();
            for p in &parts {
                seg.extend_from_slice(p);
            }
            assert_eq!(seg, buf[..n], "{fill:?}: segment {}", seen.len());
            let payload = TcpRepr::parse(&seg, None).unwrap().payload.len();
            let short = payload < limits.min_payload;
            seen.push((!parts.is_empty(), short, parts.len()));
            if !parts.is_empty() {
                assert!(!short && parts.len() <= limits.max_parts, "{seen:?}");
            }
            if fill == ChecksumFill::Full {
                // What the peer makes of the gathered form: B places it like any segment.
                gathered.b.handle_segment(now, &seg);
            }
        }
        let more = gathered
            .a
            .poll_transmit_out(now, out(&mut hdr, fill, &mut parts, limits));
        assert_eq!(more, None, "the twin has no more either");
        // Each case came up: gathered in one and in two slices, copied as short, and copied
        // though long enough (its three slices are over the limit).
        assert!(seen.contains(&(true, false, 1)), "{seen:?}");
        assert!(seen.contains(&(true, false, 2)), "{seen:?}");
        assert!(seen.iter().any(|s| !s.0 && s.1), "{seen:?}");
        assert!(seen.iter().any(|s| !s.0 && !s.1), "{seen:?}");
        let (c, g) = (copied.a.stats(), gathered.a.stats());
        assert_eq!(c.tx_payload_copied, want.len() as u64);
        assert_eq!(
            (c.tx_payload_gathered, c.bytes_sent),
            (0, want.len() as u64)
        );
        assert!(
            g.tx_payload_gathered > 0 && g.tx_payload_copied > 0,
            "{g:?}"
        );
        assert_eq!(g.tx_payload_copied + g.tx_payload_gathered, g.bytes_sent);
        if fill == ChecksumFill::Full {
            let done = gathered.b.poll_completion().expect("B completed the SEND");
            assert_eq!(done.status, WcStatus::Success);
            assert_eq!(
                done.buf.as_deref().map(|b| &b[..want.len()]),
                Some(&want[..])
            );
        }
    }
}

/// READ responses and posts from registered regions are copied once, when posted, into a
/// buffer of the connection's (`tx_payload_staged`): for a caller that gathers their segments
/// leave from it at any length, with no second copy; for one that does not, the second copy
/// is made and counted (`tx_payload_staged_copied`). Either way the requester gets the bytes.
#[test]
fn staged_bytes_leave_without_a_second_copy_where_the_caller_gathers() {
    // The TUN driver's limits: payloads under 2 KiB are normally copied.
    let limits = GatherLimits {
        max_parts: 2,
        min_payload: 2048,
        gso_payload: 0,
    };
    let fill = ChecksumFill::Full;
    let region = pattern(5, 5000);
    let want_read = region[100..3100].to_vec();
    let want_send: Vec<u8> = [&region[10..60], &region[200..2300]].concat();
    let staged = (want_read.len() + want_send.len()) as u64;
    let mut runs = Vec::new();
    for gather in [false, true] {
        let mut d = established(true);
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ;
        let mr = d.b.register_mr(region.clone(), access).unwrap();
        d.a.post_recv(1, vec![0; 4000]).unwrap();
        d.settle(10 * MS);
        let sg = [(10, 50), (200, 2100)].map(|(offset, len)| Sge {
            lkey: mr.rkey,
            offset,
            len,
        });
        d.b.post_send_sg(2, WrOp::Send { imm: None }, &sg).unwrap();
        d.a.post_read(3, mr.rkey, mr.addr + 100, vec![0; 3000])
            .unwrap();
        let now = d.now;
        let len = d.a.max_segment_len();
        let (mut buf, mut parts) = (vec![0u8; len], Vec::new());
        // A's READ request (and its ACK of nothing new) to B.
        while let Some(n) = d.a.poll_transmit_into(now, &mut buf, fill) {
            d.b.handle_segment(now, &buf[..n]);
        }
        // B's SEND and READ response, built the one way or the other, to A.
        let mut data_segments = 0;
        loop {
            let seg = if gather {
                let Some(h) =
                    d.b.poll_transmit_out(now, out(&mut buf, fill, &mut parts, limits))
                else {
                    break;
                };
                let mut seg = buf[..h].to_vec();
                for p in &parts {
                    seg.extend_from_slice(p);
                }
                seg
            } else {
                let Some(n) = d.b.poll_transmit_into(now, &mut buf, fill) else {
                    break;
                };
                buf[..n].to_vec()
            };
            let payload = TcpRepr::parse(&seg, None).unwrap().payload.len();
            if payload > 0 {
                data_segments += 1;
                // Gathered whatever its length: the short ones too.
                assert_eq!(!parts.is_empty(), gather, "a {payload}-byte payload");
            }
            d.a.handle_segment(now, &seg);
        }
        assert!(data_segments >= 4, "{data_segments}");
        d.settle(10 * MS);
        let mut done: Vec<_> = std::iter::from_fn(|| d.a.poll_completion())
            .map(|c| (c.wr_id, c.status, c.buf))
            .collect();
        done.sort_by_key(|c| c.0);
        let bufs: Vec<_> = done.iter().map(|c| (c.0, c.1)).collect();
        assert_eq!(bufs, [(1, WcStatus::Success), (3, WcStatus::Success)]);
        assert_eq!(
            done[0].2.as_deref().map(|b| &b[..want_send.len()]),
            Some(&want_send[..])
        );
        assert_eq!(done[1].2.as_deref(), Some(&want_read[..]));
        runs.push(d.b.stats());
    }
    let (c, g) = (&runs[0], &runs[1]);
    // Copied once at post on both; copied again only where the caller does not gather.
    assert_eq!((c.tx_payload_staged, g.tx_payload_staged), (staged, staged));
    assert_eq!(
        (
            c.tx_payload_copied,
            c.tx_payload_staged_copied,
            c.tx_payload_gathered
        ),
        (c.bytes_sent, c.bytes_sent, 0)
    );
    assert_eq!(
        (
            g.tx_payload_copied,
            g.tx_payload_staged_copied,
            g.tx_payload_gathered
        ),
        (0, 0, g.bytes_sent)
    );
    assert!(g.bytes_sent >= staged, "{g:?}");
}

/// Segmentation offload: an S-framed connection whose caller takes super-segments sends up to
/// `gso_payload` bytes of one message in one packet, in whole segments of its payload MSS,
/// each recorded in the scoreboard; the receiver places a super-segment whole. A per-segment
/// connection with the same caller sends one segment per packet (its options differ per
/// segment, so no offload could cut one).
#[test]
fn an_s_connection_sends_super_segments_of_whole_segments_of_one_message() {
    let limits = GatherLimits {
        max_parts: 3,
        min_payload: 2048,
        gso_payload: 64_000,
    };
    for framing in [
        crate::config::Framing::Seq,
        crate::config::Framing::PerSegment,
    ] {
        let (mut a, mut b) = configs(true);
        a.framing = framing;
        b.framing = framing;
        let mut d = BackToBack::established(a, b, MS);
        let len = 200_000;
        d.b.post_recv(1, vec![0; len]).unwrap();
        d.settle(10 * MS);
        let data = pattern(7, len);
        d.a.post_send(WorkRequest::send(1, data.clone(), None))
            .unwrap();
        let mss = d.a.payload_mss() as usize;
        let now = d.now;
        let (mut hdr, mut parts) = (vec![0u8; d.a.max_segment_len()], Vec::new());
        let mut payloads = Vec::new();
        let sent_before = d.a.recovery_stats().segments_sent;
        while let Some(h) =
            d.a.poll_transmit_out(now, out(&mut hdr, ChecksumFill::Full, &mut parts, limits))
        {
            let mut seg = hdr[..h].to_vec();
            for p in &parts {
                seg.extend_from_slice(p);
            }
            let n = TcpRepr::parse(&seg, None).unwrap().payload.len();
            if n > 0 {
                payloads.push(n);
            }
            d.b.handle_segment(now, &seg);
        }
        let seq = framing == crate::config::Framing::Seq;
        if seq {
            assert!(payloads.iter().any(|&n| n > mss), "{payloads:?}");
            for &n in &payloads {
                assert!(
                    n <= 64_000 && (n % mss == 0 || n < mss),
                    "{n} of {mss}: {payloads:?}"
                );
            }
            let segments: usize = payloads.iter().map(|n| n.div_ceil(mss)).sum();
            let s = d.a.stats();
            assert_eq!(
                s.gso_sent as usize,
                payloads.iter().filter(|&&n| n > mss).count()
            );
            // The scoreboard holds a segment per MSS, as the peer will see them.
            let recorded = d.a.recovery_stats().segments_sent - sent_before;
            assert_eq!(recorded as usize, segments);
            assert!(d.b.stats().super_segments_in > 0);
        } else {
            assert!(payloads.iter().all(|&n| n <= mss), "{payloads:?}");
            assert_eq!(d.a.stats().gso_sent, 0);
        }
        // Whatever the cut, B places it: the rest of the message follows, and it completes.
        d.run(Duration::from_secs(1), pass, |d| d.b.has_completion());
        let c = d.b.poll_completion().expect("the SEND completes");
        assert_eq!(c.status, WcStatus::Success);
        assert_eq!(c.buf.as_deref(), Some(&data[..]), "{framing:?}");
    }
}
