//! One test per refusal: the status or outcome, that nothing outside the target was written
//! (canary bytes), and that messages placed earlier stay intact.

mod common;

use bth_placement::{
    Access, Cqe, DropReason, MrError, MrHandle, PlaceOutcome, Placement, PlacementConfig,
    PlacementLimits, WcOp, WcStatus,
};
use bth_wire::{MessageKind, MsgClass, Reth};
use common::{cut, only, read_request, rr_bytes, seg, write_at, CANARY};

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);
const F: u16 = 0xFFFE; // every test crosses the MSN wrap

fn placement() -> Placement {
    Placement::new(PlacementConfig::new(F))
}

fn drain(p: &mut Placement) -> Vec<Cqe> {
    std::iter::from_fn(|| p.poll_completion()).collect()
}

fn canary(n: usize) -> Vec<u8> {
    vec![CANARY; n]
}

fn is_canary(b: &[u8]) -> bool {
    b.iter().all(|&x| x == CANARY)
}

#[test]
fn send_longer_than_buffer_is_a_length_error_inside_the_buffer_only() {
    let mut p = placement();
    p.post_recv(1, canary(8)).unwrap();
    p.post_recv(2, canary(50)).unwrap();
    p.post_recv(3, canary(50)).unwrap();
    let good = b"earlier!";
    assert!(matches!(
        p.place(&only(MessageKind::Send, F, good, None, None)),
        PlaceOutcome::Placed { .. }
    ));
    let long: Vec<u8> = (0..100).collect();
    let s = |a: usize, b: usize| {
        seg(
            MessageKind::Send,
            F.wrapping_add(1),
            a as u32,
            &long[a..b],
            100,
            None,
            None,
        )
    };
    assert_eq!(p.place(&s(0, 40)), PlaceOutcome::Placed { new_bytes: 40 });
    // Crosses the 50-byte buffer end: the message fails, nothing of this segment is written.
    assert_eq!(p.place(&s(40, 80)), PlaceOutcome::LengthError);
    assert_eq!(
        p.place(&s(80, 100)),
        PlaceOutcome::Dropped(DropReason::MessageFailed)
    );
    let c = drain(&mut p);
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[0].msn, c[0].status, c[0].byte_len),
        (F, WcStatus::Success, 8)
    );
    assert_eq!(c[0].buf.as_deref(), Some(&good[..]));
    assert_eq!(
        (c[1].wr_id, c[1].status, c[1].byte_len),
        (2, WcStatus::LocalLengthError, 100)
    );
    let buf = c[1].buf.as_ref().unwrap();
    assert_eq!(&buf[..40], &long[..40]);
    assert!(
        is_canary(&buf[40..]),
        "crossing segment must not be written"
    );
    assert_eq!(buf.len(), 50);
    let n = p.counters();
    assert_eq!((n.length_errors, n.failed_message_segments), (1, 1));
    assert_eq!(n.bytes_placed, n.bytes_copied);
    // The next receive is untouched and still works.
    p.place(&only(
        MessageKind::Send,
        F.wrapping_add(2),
        b"ok",
        None,
        None,
    ));
    let c = drain(&mut p);
    assert_eq!(&c[0].buf.as_ref().unwrap()[..2], b"ok");
    assert!(is_canary(&c[0].buf.as_ref().unwrap()[2..]));
}

fn write_setup() -> (Placement, MrHandle, MrHandle, MrHandle) {
    let mut p = placement();
    let a = p.regions_mut().register(canary(64), RW).unwrap();
    let b = p.regions_mut().register(canary(64), RW).unwrap();
    let ro = p
        .regions_mut()
        .register(canary(64), Access::REMOTE_READ)
        .unwrap();
    (p, a, b, ro)
}

fn regions_untouched(p: &Placement, hs: &[MrHandle]) {
    for h in hs {
        assert!(
            is_canary(p.regions().bytes(h.rkey).unwrap()),
            "region {:#x} written",
            h.rkey
        );
    }
}

#[test]
fn write_access_violations_write_nothing() {
    let (mut p, a, b, ro) = write_setup();
    // An earlier good write into `a`, which must survive everything below.
    let good = [0xAA; 16];
    assert_eq!(
        p.place(&write_at(F, &good, a.rkey, a.addr + 8)),
        PlaceOutcome::Placed { new_bytes: 16 }
    );
    // Stale rkey: a region deregistered and its slot re-used.
    let gone = p.regions_mut().register(canary(64), RW).unwrap();
    p.regions_mut().deregister(gone.rkey).unwrap();
    let reused = p.regions_mut().register(canary(64), RW).unwrap();
    assert_ne!(gone.rkey, reused.rkey);
    let data = [0x55u8; 8];
    let cases: Vec<(u32, u64, usize)> = vec![
        (0xDEAD_BE00, a.addr, 8),    // unknown rkey
        (gone.rkey, reused.addr, 8), // stale rkey (same slot, new key)
        (gone.rkey, gone.addr, 8),   // stale rkey at its old address
        (ro.rkey, ro.addr, 8),       // no REMOTE_WRITE
        (a.rkey, a.addr - 1, 8),     // starts before the region
        (a.rkey, a.addr + 57, 8),    // ends one past the region
        (a.rkey, a.addr + 64, 8),    // in the guard gap
        (a.rkey, b.addr, 8),         // another region's address under a's rkey
        (a.rkey, u64::MAX - 3, 8),   // addr + len wraps u64
        (a.rkey, 0, 8),              // address 0
    ];
    for (i, &(rkey, addr, len)) in cases.iter().enumerate() {
        let msn = F.wrapping_add(1 + i as u16);
        let out = p.place(&write_at(msn, &data[..len], rkey, addr));
        assert!(
            matches!(out, PlaceOutcome::AccessError(_)),
            "case {i}: {out:?}"
        );
    }
    let c = drain(&mut p);
    assert_eq!(c.len(), cases.len());
    for (i, c) in c.iter().enumerate() {
        assert_eq!(c.msn, F.wrapping_add(1 + i as u16), "in MSN order");
        assert_eq!(
            (c.wr_id, c.class, c.status),
            (0, MsgClass::Write, WcStatus::RemoteAccessError)
        );
        assert_eq!(
            (c.op, c.imm, c.buf.is_none()),
            (WcOp::RecvRdmaWithImm, None, true)
        );
    }
    let abytes = p.regions().bytes(a.rkey).unwrap();
    assert!(is_canary(&abytes[..8]) && is_canary(&abytes[24..]));
    assert_eq!(&abytes[8..24], &good);
    regions_untouched(&p, &[b, ro, reused]);
    assert_eq!(p.counters().access_errors, cases.len() as u64);
    assert_eq!(p.counters().bytes_placed, 16);
}

#[test]
fn failed_multi_segment_write_drops_later_segments_and_completes_at_its_end() {
    let (mut p, a, b, _) = write_setup();
    let data: Vec<u8> = (0..48).collect();
    let reth = Some(Reth {
        rkey: a.rkey,
        addr: a.addr + 32,
    }); // 48 bytes from +32 overrun 64
    let s = |x: usize, y: usize| {
        seg(
            MessageKind::RdmaWrite,
            F,
            x as u32,
            &data[x..y],
            48,
            Some(9),
            reth,
        )
    };
    assert_eq!(p.place(&s(0, 16)), PlaceOutcome::Placed { new_bytes: 16 });
    assert!(matches!(
        p.place(&s(32, 48)),
        PlaceOutcome::AccessError(MrError::OutOfBounds { .. })
    ));
    assert!(
        drain(&mut p).is_empty(),
        "the error completes when the message ends"
    );
    // Fits, but the message already failed: dropped, not written.
    assert_eq!(
        p.place(&s(16, 32)),
        PlaceOutcome::Dropped(DropReason::MessageFailed)
    );
    let c = drain(&mut p);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].status, c[0].byte_len, c[0].imm),
        (WcStatus::RemoteAccessError, 48, None)
    );
    let abytes = p.regions().bytes(a.rkey).unwrap();
    assert_eq!(&abytes[32..48], &data[..16]);
    assert!(is_canary(&abytes[..32]) && is_canary(&abytes[48..]));
    regions_untouched(&p, &[b]);
    // Later segments of a completed message are duplicates: still nothing written.
    assert_eq!(p.place(&s(16, 32)), PlaceOutcome::Duplicate);
    assert!(is_canary(&p.regions().bytes(a.rkey).unwrap()[48..]));
}

#[test]
fn read_request_checks_rights_and_bounds_and_answers_once() {
    let (mut p, a, _, ro) = write_setup();
    let ok = rr_bytes(ro.rkey, ro.addr + 4, 60);
    match p.place(&read_request(F, &ok)) {
        PlaceOutcome::ReadRequested(r) => {
            assert_eq!((r.rkey, r.addr, r.len), (ro.rkey, ro.addr + 4, 60));
            assert_eq!(p.regions().read(r.rkey, r.addr, r.len).unwrap().len(), 60);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        p.place(&read_request(F, &ok)),
        PlaceOutcome::Duplicate,
        "never answered twice"
    );
    let bad = [
        rr_bytes(a.rkey, a.addr, 8),          // no REMOTE_READ
        rr_bytes(ro.rkey, ro.addr + 60, 5),   // past the end
        rr_bytes(ro.rkey, u64::MAX, 2),       // wraps
        rr_bytes(ro.rkey ^ 0x80, ro.addr, 1), // wrong key
    ];
    for (i, b) in bad.iter().enumerate() {
        let out = p.place(&read_request(F.wrapping_add(1 + i as u16), b));
        assert!(matches!(out, PlaceOutcome::AccessError(_)), "{i}: {out:?}");
    }
    assert_eq!(
        p.completed_msn(MsgClass::ReadRequest),
        F.wrapping_add(bad.len() as u16)
    );
    assert!(drain(&mut p).is_empty());
    assert_eq!(p.counters().read_requests, 1);
    assert_eq!(p.counters().access_errors, bad.len() as u64);
}

#[test]
fn read_response_for_unknown_read_is_dropped() {
    let mut p = placement();
    let data = [1u8; 8];
    // Before any READ was issued.
    assert_eq!(
        p.place(&only(MessageKind::ReadResponse, 5, &data, None, None)),
        PlaceOutcome::Dropped(DropReason::UnknownRead)
    );
    p.expect_read_response(5, 77, canary(8)).unwrap();
    p.expect_read_response(6, 78, canary(8)).unwrap();
    for msn in [7u16, 100, 0x7FFF] {
        assert_eq!(
            p.place(&only(MessageKind::ReadResponse, msn, &data, None, None)),
            PlaceOutcome::Dropped(DropReason::UnknownRead)
        );
    }
    assert_eq!(p.counters().unknown_read_responses, 4);
    p.flush();
    let c = drain(&mut p);
    assert_eq!(c.len(), 2);
    for (c, wr) in c.iter().zip([77, 78]) {
        assert_eq!(
            (c.wr_id, c.status, c.op),
            (wr, WcStatus::WrFlushError, WcOp::RdmaRead)
        );
        assert!(is_canary(c.buf.as_ref().unwrap()));
    }
}

#[test]
fn read_response_length_errors() {
    let mut p = placement();
    p.expect_read_response(10, 1, canary(8)).unwrap();
    p.expect_read_response(11, 2, canary(8)).unwrap();
    p.expect_read_response(12, 3, canary(8)).unwrap();
    assert!(
        p.expect_read_response(14, 4, canary(8)).is_err(),
        "MSNs are consecutive"
    );
    let long = [7u8; 12];
    let short = [8u8; 5];
    let ok = [9u8; 8];
    // Out of order on purpose: 12 then 11 then 10.
    assert_eq!(
        p.place(&only(MessageKind::ReadResponse, 12, &ok, None, None)),
        PlaceOutcome::Placed { new_bytes: 8 }
    );
    assert_eq!(
        p.place(&only(MessageKind::ReadResponse, 11, &short, None, None)),
        PlaceOutcome::Placed { new_bytes: 5 }
    );
    assert!(drain(&mut p).is_empty(), "waits for READ 10");
    assert_eq!(
        p.place(&only(MessageKind::ReadResponse, 10, &long, None, None)),
        PlaceOutcome::LengthError
    );
    let c = drain(&mut p);
    let got: Vec<_> = c.iter().map(|c| (c.msn, c.wr_id, c.status)).collect();
    assert_eq!(
        got,
        [
            (10, 1, WcStatus::LocalLengthError),
            (11, 2, WcStatus::BadResponse),
            (12, 3, WcStatus::Success)
        ]
    );
    assert!(is_canary(c[0].buf.as_ref().unwrap()));
    assert_eq!(&c[1].buf.as_ref().unwrap()[..5], &short);
    assert!(is_canary(&c[1].buf.as_ref().unwrap()[5..]));
    assert_eq!(c[2].buf.as_deref(), Some(&ok[..]));
}

#[test]
fn receiver_not_ready_then_accepted_after_post() {
    let mut p = placement();
    assert_eq!(
        p.credit_msn(),
        F.wrapping_sub(1),
        "no credit before any post"
    );
    p.post_recv(1, canary(4)).unwrap();
    assert_eq!(p.credit_msn(), F);
    let m0 = *b"zero";
    let m1 = *b"one!";
    let beyond = only(
        MessageKind::Send,
        F.wrapping_add(1),
        &m1,
        Some(0x1234),
        None,
    );
    assert_eq!(p.place(&beyond), PlaceOutcome::ReceiverNotReady);
    assert!(!PlaceOutcome::ReceiverNotReady.accepted());
    assert_eq!(p.counters().receiver_not_ready, 1);
    assert_eq!(
        p.place(&only(MessageKind::Send, F, &m0, None, None)),
        PlaceOutcome::Placed { new_bytes: 4 }
    );
    assert_eq!(p.completed_send_msn(), F);
    assert_eq!(p.post_recv(2, canary(6)).unwrap(), F.wrapping_add(1));
    assert_eq!(p.credit_msn(), F.wrapping_add(1));
    assert_eq!(p.place(&beyond), PlaceOutcome::Placed { new_bytes: 4 });
    let c = drain(&mut p);
    assert_eq!(c[0].buf.as_deref(), Some(&m0[..]), "earlier message intact");
    assert_eq!((c[1].wr_id, c[1].imm, c[1].byte_len), (2, Some(0x1234), 4));
    assert_eq!(&c[1].buf.as_ref().unwrap()[..4], &m1);
    assert!(is_canary(&c[1].buf.as_ref().unwrap()[4..]));
    assert_eq!(p.counters().bytes_copied, 8);
}

#[test]
fn duplicates_and_out_of_window_msns_are_counted_and_harmless() {
    let limits = PlacementLimits {
        max_inflight: 16,
        ..PlacementLimits::default()
    };
    let cfg = PlacementConfig {
        max_posted_recvs: 4,
        ..PlacementConfig::new(F)
    };
    let mut p = Placement::with_limits(cfg, limits);
    let r = p.regions_mut().register(canary(32), RW).unwrap();
    p.post_recv(1, canary(4)).unwrap();
    let m = *b"abcd";
    p.place(&only(MessageKind::Send, F, &m, None, None));
    let c = drain(&mut p);
    // Completed MSN again, and the same bytes of a now-gone message: duplicate, no write.
    assert_eq!(
        p.place(&only(MessageKind::Send, F, b"XXXX", None, None)),
        PlaceOutcome::Duplicate
    );
    assert_eq!(c[0].buf.as_deref(), Some(&m[..]));
    // Beyond what the receive queue could ever hold (4), or 2^15 away.
    for k in [4u16, 1000, 0x7FFF] {
        let out = p.place(&only(
            MessageKind::Send,
            F.wrapping_add(1 + k),
            b"x",
            None,
            None,
        ));
        assert_eq!(out, PlaceOutcome::Dropped(DropReason::OutOfWindow), "{k}");
        assert!(!out.accepted());
    }
    // Writes: beyond max_inflight (16) is out of window; inside is fine out of order.
    let w = |msn: u16| write_at(msn, b"w", r.rkey, r.addr);
    assert_eq!(
        p.place(&w(F.wrapping_add(16))),
        PlaceOutcome::Dropped(DropReason::OutOfWindow)
    );
    assert_eq!(
        p.place(&w(F.wrapping_add(15))),
        PlaceOutcome::Placed { new_bytes: 1 }
    );
    assert_eq!(p.place(&w(F.wrapping_add(15))), PlaceOutcome::Duplicate);
    assert!(is_canary(&p.regions().bytes(r.rkey).unwrap()[1..]));
    let n = p.counters();
    assert_eq!(
        (n.duplicate_segments, n.duplicate_bytes, n.out_of_window),
        (2, 5, 4)
    );
}

#[test]
fn contradicting_lengths_are_invalid_requests() {
    let mut p = placement();
    p.post_recv(1, canary(64)).unwrap();
    p.post_recv(2, canary(64)).unwrap();
    let d = [3u8; 40];
    let s = |msn: u16, a: u32, b: u32, total: u32| {
        seg(
            MessageKind::Send,
            msn,
            a,
            &d[a as usize..b as usize],
            total,
            None,
            None,
        )
    };
    // Bytes up to 40 arrived, then a LAST claims the message ends at 30.
    assert!(matches!(
        p.place(&s(F, 20, 40, 64)),
        PlaceOutcome::Placed { .. }
    ));
    assert_eq!(
        p.place(&s(F, 10, 30, 30)),
        PlaceOutcome::Dropped(DropReason::Invalid)
    );
    // Length 20 known, then a segment beyond it.
    let m2 = F.wrapping_add(1);
    assert!(matches!(
        p.place(&s(m2, 10, 20, 20)),
        PlaceOutcome::Placed { .. }
    ));
    assert_eq!(
        p.place(&s(m2, 20, 25, 64)),
        PlaceOutcome::Dropped(DropReason::Invalid)
    );
    let c = drain(&mut p);
    assert_eq!(
        c.iter().map(|c| c.status).collect::<Vec<_>>(),
        [WcStatus::RemoteInvalidRequest; 2]
    );
    assert!(is_canary(&c[1].buf.as_ref().unwrap()[20..]));
    assert_eq!(p.counters().invalid, 2);
}

#[test]
fn fragmentation_budget_bounds_state_but_in_order_retransmission_completes() {
    let limits = PlacementLimits {
        max_ranges: 8,
        ..PlacementLimits::default()
    };
    let mut p = Placement::with_limits(PlacementConfig::new(F), limits);
    p.post_recv(1, canary(1000)).unwrap();
    let d: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    let s = |a: usize, b: usize| seg(MessageKind::Send, F, a as u32, &d[a..b], 1000, None, None);
    // A peer sends every other byte: only 8 disjoint ranges are kept.
    let mut refused = 0;
    for a in (1..999).step_by(2) {
        match p.place(&s(a, a + 1)) {
            PlaceOutcome::Placed { .. } => {}
            PlaceOutcome::Dropped(DropReason::TooFragmented) => refused += 1,
            o => panic!("{o:?}"),
        }
    }
    assert!(p.ranges_in_use() <= 8);
    assert_eq!(refused, 499 - 8);
    // Retransmission from the start (what TCP does from its cumulative point) always merges.
    for (a, b) in cut(1000, 100) {
        assert!(p.place(&s(a as usize, b as usize)).accepted());
    }
    let c = drain(&mut p);
    assert_eq!(c[0].buf.as_deref(), Some(&d[..]));
    assert_eq!(p.counters().bytes_copied, 1000);
    assert_eq!(p.ranges_in_use(), 0);
}

#[test]
fn full_completion_queue_pauses_in_order_completion() {
    let limits = PlacementLimits {
        max_completions: 2,
        max_inflight: 4,
        ..PlacementLimits::default()
    };
    let mut p = Placement::with_limits(PlacementConfig::new(F), limits);
    let r = p.regions_mut().register(canary(8), RW).unwrap();
    let wi = |msn: u16| {
        only(
            MessageKind::RdmaWrite,
            msn,
            b"i",
            Some(u32::from(msn)),
            Some(Reth {
                rkey: r.rkey,
                addr: r.addr,
            }),
        )
    };
    // Two completions fit; the next four finished writes stay in the window (max_inflight 4).
    for k in 0..6 {
        assert!(p.place(&wi(F.wrapping_add(k))).accepted());
    }
    assert_eq!(p.pending_completions(), 2);
    assert_eq!(p.completed_msn(MsgClass::Write), F.wrapping_add(1));
    // Window full of finished-but-unreported writes: the peer is held off.
    assert_eq!(
        p.place(&wi(F.wrapping_add(6))),
        PlaceOutcome::Dropped(DropReason::OutOfWindow)
    );
    let c = drain(&mut p);
    let imms: Vec<_> = c.iter().map(|c| c.imm.unwrap() as u16).collect();
    let want: Vec<u16> = (0..6).map(|k| F.wrapping_add(k)).collect();
    assert_eq!(imms, want);
    assert!(c
        .iter()
        .all(|c| c.op == WcOp::RecvRdmaWithImm && c.byte_len == 1));
}

#[test]
fn plain_write_completes_silently_but_advances_the_class() {
    let (mut p, a, _, _) = write_setup();
    let reth = Some(Reth {
        rkey: a.rkey,
        addr: a.addr,
    });
    let imm_w = only(
        MessageKind::RdmaWrite,
        F.wrapping_add(1),
        b"second",
        Some(42),
        Some(Reth {
            rkey: a.rkey,
            addr: a.addr + 10,
        }),
    );
    assert!(p.place(&imm_w).accepted());
    assert!(drain(&mut p).is_empty(), "waits for write F");
    assert!(p
        .place(&only(MessageKind::RdmaWrite, F, b"first", None, reth))
        .accepted());
    let c = drain(&mut p);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].msn, c[0].imm, c[0].byte_len, c[0].wr_id),
        (F.wrapping_add(1), Some(42), 6, 0)
    );
    assert_eq!(p.completed_msn(MsgClass::Write), F.wrapping_add(1));
}

#[test]
fn flush_returns_every_buffer_and_refuses_more() {
    let mut p = placement();
    for i in 0..3 {
        p.post_recv(i, canary(10)).unwrap();
    }
    p.expect_read_response(0, 9, canary(4)).unwrap();
    let d = *b"0123456789";
    // MSN F+1 complete but waiting for F (half arrived).
    p.place(&only(MessageKind::Send, F.wrapping_add(1), &d, None, None));
    p.place(&seg(MessageKind::Send, F, 0, &d[..5], 10, None, None));
    p.flush();
    let c = drain(&mut p);
    let got: Vec<_> = c.iter().map(|c| (c.class, c.wr_id, c.status)).collect();
    assert_eq!(
        got,
        [
            (MsgClass::Send, 0, WcStatus::WrFlushError),
            (MsgClass::Send, 1, WcStatus::WrFlushError),
            (MsgClass::Send, 2, WcStatus::WrFlushError),
            (MsgClass::ReadResponse, 9, WcStatus::WrFlushError),
        ]
    );
    assert!(c.iter().all(|c| c.buf.is_some()));
    assert_eq!(
        p.place(&only(MessageKind::Send, F, &d, None, None)),
        PlaceOutcome::Dropped(DropReason::Flushed)
    );
    let rej = p.post_recv(5, canary(3)).unwrap_err();
    assert_eq!(rej.buf.len(), 3);
    assert_eq!(p.ranges_in_use(), 0);
}

#[test]
fn receive_queue_is_bounded() {
    let cfg = PlacementConfig {
        max_posted_recvs: 2,
        ..PlacementConfig::new(0)
    };
    let mut p = Placement::new(cfg);
    assert_eq!(p.post_recv(1, canary(1)).unwrap(), 0);
    assert_eq!(p.post_recv(2, canary(1)).unwrap(), 1);
    let e = p.post_recv(3, canary(7)).unwrap_err();
    assert_eq!(e.buf.len(), 7);
    assert_eq!(e.to_string(), "queue full: 2 entries posted");
}

#[test]
fn messages_above_the_announced_limit_are_invalid_requests() {
    let cfg = PlacementConfig {
        max_message_len: 16,
        ..PlacementConfig::new(F)
    };
    let mut p = Placement::new(cfg);
    p.post_recv(1, canary(64)).unwrap();
    let r = p.regions_mut().register(canary(64), RW).unwrap();
    let d = [1u8; 17];
    let invalid = PlaceOutcome::Dropped(DropReason::Invalid);
    assert_eq!(
        p.place(&only(MessageKind::Send, F, &d, None, None)),
        invalid
    );
    assert_eq!(p.place(&write_at(F, &d, r.rkey, r.addr)), invalid);
    let c = drain(&mut p);
    assert_eq!(c.len(), 2);
    assert!(c.iter().all(|c| c.status == WcStatus::RemoteInvalidRequest));
    assert!(is_canary(c[0].buf.as_ref().unwrap()));
    regions_untouched(&p, &[r]);
    // READ responses are bounded by their sink, not by the announced limit.
    p.expect_read_response(3, 4, canary(17)).unwrap();
    let resp = only(MessageKind::ReadResponse, 3, &d, None, None);
    assert_eq!(p.place(&resp), PlaceOutcome::Placed { new_bytes: 17 });
    assert!(drain(&mut p)[0].is_success());
}
