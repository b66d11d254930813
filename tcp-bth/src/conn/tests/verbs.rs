//! Verbs semantics an IB RC user expects: error completions on the requester's side, RNR retry
//! exceeded, a failed QP that flushes new work, zero-length messages with immediates, and the
//! pure ACK as the spec defines it.

use super::*;
use crate::conn::Sge;
use crate::wire::{NakCode, TcpRepr};
use bth_placement::{Access, WcStatus};

/// Completions of one side, drained until `n` or 5 s of virtual time.
fn collect(d: &mut BackToBack, side_a: bool, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    let ok = d.run(Duration::from_secs(5), pass, |d| {
        let c = if side_a { &mut d.a } else { &mut d.b };
        while let Some(x) = c.poll_completion() {
            out.push(x);
        }
        out.len() >= n
    });
    assert!(ok, "{} of {n} completions: {out:?}", out.len());
    out
}

fn imm_wr(wr_id: u64, op: WrOp, data: Vec<u8>) -> WorkRequest {
    WorkRequest {
        wr_id,
        op,
        sg_list: if data.is_empty() {
            Vec::new()
        } else {
            vec![Bytes::from(data)]
        },
    }
}

/// IB RC: a SEND longer than the receive posted for it completes with a local length error at
/// the receiver and with a remote invalid request error at the sender; both QPs fail. It used
/// to complete as a success at the sender.
#[test]
fn send_longer_than_the_receive_fails_on_both_sides() {
    let mut d = established(true);
    d.b.post_recv(10, vec![0; 100]).unwrap();
    d.b.post_recv(11, vec![0; 100]).unwrap();
    d.a.post_send(WorkRequest::send(1, pattern(1, 100), None))
        .unwrap();
    d.a.post_send(WorkRequest::send(2, pattern(2, 5000), None))
        .unwrap();
    d.a.post_send(WorkRequest::send(3, pattern(3, 10), None))
        .unwrap();
    let a = collect(&mut d, true, 3);
    let status = |id: u64| a.iter().find(|c| c.wr_id == id).map(|c| c.status);
    assert_eq!(status(1), Some(WcStatus::Success));
    assert_eq!(status(2), Some(WcStatus::RemoteInvalidRequest), "{a:?}");
    assert_eq!(status(3), Some(WcStatus::WrFlushError));
    let b = collect(&mut d, false, 2);
    assert_eq!((b[0].wr_id, b[0].status), (10, WcStatus::Success));
    assert_eq!((b[1].wr_id, b[1].status), (11, WcStatus::LocalLengthError));
    assert_eq!(
        b[1].buf.as_ref().map(Vec::len),
        Some(100),
        "buffer handed back"
    );
    assert_eq!(d.b.error(), Some(ConnectionError::LocalLength));
    assert!(matches!(
        d.a.error(),
        Some(ConnectionError::PeerNak(n)) if n.code == NakCode::InvalidRequest && n.msn == 1
    ));
    assert_eq!((d.b.stats().naks_sent, d.a.stats().naks_received), (1, 1));
}

/// The NAK travels on an RST: if that RST is lost, the requester's next segment draws it
/// again from the failed responder (RFC 9293 §3.10.7.1), NAK included.
#[test]
fn a_lost_nak_is_sent_again_when_the_requester_retransmits() {
    let mut d = established(true);
    d.b.post_recv(10, vec![0; 10]).unwrap();
    d.settle(Duration::from_millis(10));
    d.a.post_send(WorkRequest::send(1, pattern(1, 500), None))
        .unwrap();
    let mut dropped = 0;
    let ok = d.run(
        Duration::from_secs(5),
        |dir, _, p| {
            let rst = TcpRepr::parse(&p, None).is_ok_and(|s| s.flags.rst());
            if dir == Direction::BtoA && rst && dropped == 0 {
                dropped += 1;
                return None;
            }
            Some(p)
        },
        |d| d.a.is_closed(),
    );
    assert!(ok && dropped == 1);
    let c = collect(&mut d, true, 1);
    assert_eq!(c[0].status, WcStatus::RemoteInvalidRequest);
}

/// A SEND that finds no posted receive waits for credit only as long as `rnr_timeout`; then
/// it completes with RNR retry exceeded, later work flushes, and the peer is reset.
#[test]
fn send_without_a_receive_ends_in_rnr_retry_exceeded() {
    let (mut ac, bc) = configs(true);
    ac.rnr_timeout = Some(Duration::from_millis(300));
    let mut d = BackToBack::established(ac, bc, MS);
    let msn =
        d.a.post_send(WorkRequest::send(1, pattern(1, 64), None))
            .unwrap();
    d.a.post_send(WorkRequest::send(2, pattern(2, 64), None))
        .unwrap();
    let start = d.now;
    let c = collect(&mut d, true, 2);
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::RnrRetryExceeded));
    assert_eq!((c[1].wr_id, c[1].status), (2, WcStatus::WrFlushError));
    let waited = d.now - start;
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(1));
    assert_eq!(d.a.error(), Some(ConnectionError::RnrRetryExceeded { msn }));
    d.settle(Duration::from_millis(50));
    assert_eq!(d.b.error(), Some(ConnectionError::Reset));
}

/// Credit that arrives in time stops the RNR clock: a receive posted well within a 1 s limit
/// lets the SEND through, and the clock does not carry over to the next SEND (two waits add up
/// to more than the limit). `BackToBack::run` may overshoot to the next event (persist probes back
/// off), hence the margin.
#[test]
fn credit_in_time_stops_the_rnr_clock() {
    let (mut ac, bc) = configs(true);
    ac.rnr_timeout = Some(Duration::from_secs(1));
    let mut d = BackToBack::established(ac, bc, MS);
    d.a.post_send(WorkRequest::send(1, pattern(1, 64), None))
        .unwrap();
    d.run(Duration::from_millis(200), pass, |_| false);
    d.b.post_recv(10, vec![0; 64]).unwrap();
    assert_eq!(collect(&mut d, true, 1)[0].status, WcStatus::Success);
    d.a.post_send(WorkRequest::send(2, pattern(2, 64), None))
        .unwrap();
    d.run(Duration::from_millis(250), pass, |_| false);
    d.b.post_recv(11, vec![0; 64]).unwrap();
    assert_eq!(collect(&mut d, true, 1)[0].status, WcStatus::Success);
    assert!(d.a.error().is_none());
}

/// After a fatal error the QP is in the error state: posts are accepted and complete at once
/// with `WrFlushError`, buffers handed back (IB verbs), instead of being refused.
#[test]
fn posts_to_a_failed_qp_complete_flushed() {
    let mut d = established(true);
    d.a.abort();
    d.settle(Duration::from_millis(10));
    while d.a.poll_completion().is_some() {}
    d.a.post_send(WorkRequest::send(1, pattern(1, 10), None))
        .unwrap();
    d.a.post_recv(2, vec![7; 33]).unwrap();
    d.a.post_read(3, 1, 0x1000, vec![0; 44]).unwrap();
    let c: Vec<_> = std::iter::from_fn(|| d.a.poll_completion()).collect();
    let got: Vec<_> = c
        .iter()
        .map(|c| (c.wr_id, c.op, c.status, c.buf.as_ref().map(Vec::len)))
        .collect();
    assert_eq!(
        got,
        [
            (1, WcOp::Send, WcStatus::WrFlushError, None),
            (2, WcOp::Recv, WcStatus::WrFlushError, Some(33)),
            (3, WcOp::RdmaRead, WcStatus::WrFlushError, Some(44)),
        ]
    );
    assert_eq!(d.a.stats().bytes_sent, 0, "nothing went on the wire");
}

/// Zero-length SEND_WITH_IMM and RDMA_WRITE_WITH_IMM (the usual completion signal of
/// collective libraries): each takes one pad byte of sequence space, completes on both sides
/// with byte_len 0 and its immediate, consumes a receive (SEND) or none (WRITE), and survives
/// the loss of its segment.
#[test]
fn zero_length_messages_with_immediate_complete_on_both_sides() {
    let mut d = established(true);
    let mr =
        d.b.register_mr(vec![0; 16], Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
    d.b.post_recv(10, vec![0; 8]).unwrap();
    d.settle(Duration::from_millis(10));
    let before = d.a.seq_state().1;
    d.a.post_send(imm_wr(1, WrOp::Send { imm: Some(0xdead) }, Vec::new()))
        .unwrap();
    let write = WrOp::RdmaWrite {
        rkey: mr.rkey,
        remote_addr: mr.addr,
        imm: Some(0xbeef),
    };
    d.a.post_send(imm_wr(2, write, Vec::new())).unwrap();
    // Drop the first transmission of each: they are retransmitted like any data.
    let mut seen = 0;
    let mut out = Vec::new();
    let ok = d.run(
        Duration::from_secs(5),
        |dir, _, p| {
            let data = TcpRepr::parse(&p, None).is_ok_and(|s| !s.payload.is_empty());
            if dir == Direction::AtoB && data {
                seen += 1;
                if seen <= 2 {
                    return None;
                }
            }
            Some(p)
        },
        |d| {
            while let Some(c) = d.b.poll_completion() {
                out.push(c);
            }
            out.len() >= 2
        },
    );
    assert!(ok, "{out:?}");
    let got: Vec<_> = out
        .iter()
        .map(|c| (c.wr_id, c.op, c.byte_len, c.imm, c.status))
        .collect();
    assert_eq!(
        got,
        [
            (10, WcOp::Recv, 0, Some(0xdead), WcStatus::Success),
            (0, WcOp::RecvRdmaWithImm, 0, Some(0xbeef), WcStatus::Success),
        ]
    );
    let a = collect(&mut d, true, 2);
    assert!(
        a.iter()
            .all(|c| c.status == WcStatus::Success && c.byte_len == 0),
        "{a:?}"
    );
    assert_eq!(
        d.a.seq_state().1.wrapping_sub(before),
        2,
        "one pad byte each"
    );
    assert_eq!(
        d.b.mr_bytes(mr.rkey),
        Some(&[0u8; 16][..]),
        "nothing written"
    );
    assert!(d.a.recovery_stats().retransmits >= 2);
}

/// The spec's pure ACK, BTH form: R=0 with the newest SEND MSN completed in order, unless the
/// ACK owes the peer new credit (R=1, the credit MSN). Every pure ACK used to carry R=1.
#[test]
fn pure_acks_carry_credit_only_when_it_changed() {
    let mut d = established(true);
    let mut acks = Vec::new();
    d.b.post_recv(10, vec![0; 8]).unwrap();
    d.b.post_recv(11, vec![0; 8]).unwrap();
    d.a.post_send(WorkRequest::send(1, pattern(1, 8), None))
        .unwrap();
    d.run(
        Duration::from_millis(50),
        |dir, _, p| {
            if let Ok(s) = TcpRepr::parse(&p, None) {
                if dir == Direction::BtoA && s.payload.is_empty() && !s.flags.fin() {
                    let b = s.options.bth.expect("BTH on every segment");
                    acks.push((b.rtr, b.msn));
                }
            }
            Some(p)
        },
        |_| false,
    );
    // B's first MSN is 0: credit for two receives is MSN 1; after the SEND, completed MSN 0.
    assert!(acks.contains(&(true, 1)), "{acks:?}");
    assert!(acks.contains(&(false, 0)), "{acks:?}");
    let credits = acks.iter().filter(|a| a.0).count();
    assert!(
        credits < acks.len(),
        "not every pure ACK is a credit update: {acks:?}"
    );
}

/// A credit update that is lost is not lost for good: the sender's persist probe draws an ACK
/// that repeats the credit.
#[test]
fn a_lost_credit_update_is_repeated() {
    let mut d = established(true);
    d.a.post_send(WorkRequest::send(1, pattern(1, 8), None))
        .unwrap();
    d.settle(Duration::from_millis(10));
    d.b.post_recv(10, vec![0; 8]).unwrap();
    let mut dropped = 0;
    let ok = d.run(
        Duration::from_secs(5),
        |dir, _, p| {
            let credit =
                TcpRepr::parse(&p, None).is_ok_and(|s| s.options.bth.is_some_and(|b| b.rtr));
            if dir == Direction::BtoA && credit && dropped == 0 {
                dropped += 1;
                return None;
            }
            Some(p)
        },
        |d| d.b.poll_completion().is_some(),
    );
    assert!(ok && dropped == 1, "the SEND never got its credit");
}

/// Memory the application keeps: a region registered once is rewritten locally between two
/// READs of the peer and the second READ sees the new bytes under the same rkey (it used to
/// take deregistering, which changes the rkey). Sends take their bytes from a region by
/// {lkey, offset, len}.
#[test]
fn registered_memory_is_rewritten_in_place_and_sent_from() {
    let mut d = established(true);
    let access = Access::LOCAL_WRITE | Access::REMOTE_READ;
    let mr = d.b.register_mr(pattern(1, 4096), access).unwrap();
    let read = |d: &mut BackToBack, id: u64| {
        d.a.post_read(id, mr.rkey, mr.addr + 100, vec![0; 1000])
            .unwrap();
        let c = collect(d, true, 1).remove(0);
        assert_eq!(c.status, WcStatus::Success);
        c.buf.unwrap()
    };
    assert_eq!(read(&mut d, 1), pattern(1, 4096)[100..1100]);
    d.b.mr_write(mr.rkey, 0, &pattern(2, 4096)).unwrap();
    assert_eq!(read(&mut d, 2), pattern(2, 4096)[100..1100]);
    assert!(
        d.b.mr_write(mr.rkey, 4000, &[0; 100]).is_err(),
        "past the end"
    );

    // B sends bytes 10..60 and 200..230 of its region as one SEND.
    d.a.post_recv(9, vec![0; 80]).unwrap();
    let sg = [
        Sge {
            lkey: mr.rkey,
            offset: 10,
            len: 50,
        },
        Sge {
            lkey: mr.rkey,
            offset: 200,
            len: 30,
        },
    ];
    d.b.post_send_sg(3, WrOp::Send { imm: None }, &sg).unwrap();
    let bad = Sge {
        lkey: mr.rkey,
        offset: 4090,
        len: 10,
    };
    assert!(d
        .b
        .post_send_sg(4, WrOp::Send { imm: None }, &[bad])
        .is_err());
    let c = collect(&mut d, true, 1).remove(0);
    let region = pattern(2, 4096);
    let want: Vec<u8> = [&region[10..60], &region[200..230]].concat();
    assert_eq!((c.wr_id, c.byte_len), (9, 80));
    assert_eq!(c.buf.unwrap(), want);
}
