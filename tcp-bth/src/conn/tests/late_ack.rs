//! Pure ACKs overtaken by the peer's data. Data segments carry no SACK blocks (no room beside
//! the BTH option), so in a transfer both ways the pure ACKs hold the only report of what
//! arrived out of order; one that the peer's later data overtook sits below RCV.NXT when it
//! arrives. RFC 9293's test refuses such a segment, and its SACK blocks were lost with it
//! (3,382 of them in one run of `bth-perf local --relay-loss 0.01 --relay-reorder 0.05 -b`).

use super::*;
use std::cell::{Cell, RefCell};

/// A sends a message whose first segment is lost; B's SACKs of the rest are held until B's
/// own data has reached A, then delivered. Taken, they let RACK repair the hole before the
/// tail loss probe fires; dropped, A learnt of the hole only from the probe's D-SACK.
#[test]
fn a_sack_overtaken_by_the_peers_data_still_reports_the_hole() {
    let mut d = established(true);
    d.a.post_recv(100, vec![0; 64 << 10]).unwrap();
    d.b.post_recv(1, vec![0; 64 << 10]).unwrap();
    d.settle(10 * MS);
    let mss = d.a.payload_mss() as usize;
    d.a.post_send(WorkRequest::send(1, pattern(1, 8 * mss), None))
        .unwrap();
    let lost = Cell::new(false);
    let held = RefCell::new(Vec::new());
    let mut hold = |dir: Direction, _: Duration, p: Vec<u8>| match dir {
        Direction::AtoB if !lost.replace(true) => None,
        Direction::BtoA => {
            held.borrow_mut().push(p);
            None
        }
        Direction::AtoB => Some(p),
    };
    let arrived = |d: &BackToBack| d.b.stats().ooo_placed >= 7;
    let mut at = d.now;
    while !arrived(&d) {
        at = d.now;
        assert!(d.step(&mut hold), "A's segments never arrived");
    }
    // The step moved the clock on to the next event (A's probe timer, with B's ACKs held):
    // back to the moment B took A's segments, which nothing has happened since.
    d.now = at;
    let acks = held.take();
    assert!(!acks.is_empty(), "B reported the hole");
    // B's data leaves now and reaches A first; B's SACKs follow it.
    d.b.post_send(WorkRequest::send(7, pattern(7, 1000), None))
        .unwrap();
    let late = d.now + d.delay + Duration::from_micros(10);
    for p in acks {
        d.inject(late, Direction::BtoA, p);
    }
    let (mut a_done, mut b_done) = (false, false);
    let ok = d.run(Duration::from_secs(1), pass, |d| {
        while let Some(c) = d.a.poll_completion() {
            a_done |= c.wr_id == 100;
        }
        while let Some(c) = d.b.poll_completion() {
            b_done |= c.wr_id == 1;
        }
        a_done && b_done
    });
    assert!(ok, "{:?}\n{:?}", d.a.stats(), d.b.stats());
    let (s, r) = (d.a.stats(), d.a.recovery_stats());
    assert!(s.late_acks >= 1, "{s:?}");
    assert_eq!((s.out_of_window, s.paws_drops), (0, 0), "{s:?}");
    assert_eq!(
        (r.rack_losses, r.tlp_probes, r.rto_losses),
        (1, 0, 0),
        "RACK repaired the hole from the late SACKs: {r:?}"
    );
}

/// A pure ACK below RCV.NXT that acknowledges more than SND.UNA is no late ACK (the peer's
/// later data would have acknowledged as much): refused as out of window, as before.
#[test]
fn a_pure_ack_below_rcv_nxt_that_acknowledges_new_data_is_refused() {
    let mut d = established(true);
    d.a.post_recv(100, vec![0; 4096]).unwrap();
    d.b.post_recv(1, vec![0; 4096]).unwrap();
    d.settle(10 * MS);
    // B's data moves A's RCV.NXT; A's data to B is then held, so B's ACK of it is new.
    d.b.post_send(WorkRequest::send(7, pattern(7, 1000), None))
        .unwrap();
    d.settle(10 * MS);
    let before = d.a.stats();
    d.a.post_send(WorkRequest::send(1, pattern(1, 1000), None))
        .unwrap();
    // Every ACK of B's held, so A's SND.UNA stays where it was.
    let mut acks = Vec::new();
    d.run(
        10 * MS,
        |dir, _, p| match dir {
            Direction::BtoA => {
                acks.push(p);
                None
            }
            _ => Some(p),
        },
        |_| false,
    );
    let held = acks.into_iter().next().expect("B acknowledged A's data");
    let ip = d.b.cfg.ip;
    let mut ack = crate::wire::TcpRepr::parse(&held, Some(ip)).expect("B's ACK parses");
    let (una, _, _) = d.a.seq_state();
    assert!(
        ack.ack.wrapping_sub(una) as i32 > 0,
        "the ACK is of new data"
    );
    assert!(ack.payload.is_empty(), "a pure ACK");
    // Its sequence number below A's RCV.NXT, as a stale or forged ACK would carry it (the
    // checksum made again, so only the sequence number is wrong).
    ack.seq = ack.seq.wrapping_sub(500);
    let moved = ack.to_vec(ip).expect("re-encode");
    d.a.handle_segment(d.now, &moved);
    let s = d.a.stats();
    assert_eq!(
        s.malformed, before.malformed,
        "the segment itself is sound: {s:?}"
    );
    assert_eq!(s.late_acks, before.late_acks, "{s:?}");
    assert_eq!(s.out_of_window, before.out_of_window + 1, "{s:?}");
}

/// A credit update far outside the window (a forgery, not a late copy) moves no credit; the
/// real one, delivered after it, does.
#[test]
fn a_credit_update_from_far_outside_the_window_is_ignored() {
    let mut d = established(true);
    d.a.post_send(WorkRequest::send(1, pattern(1, 500), None))
        .unwrap();
    d.settle(10 * MS);
    assert_eq!(d.a.stats().bytes_sent, 0, "no credit yet");
    d.b.post_recv(9, vec![0; 500]).unwrap();
    let mut credit = None;
    d.run(
        10 * MS,
        |dir, _, p| {
            let rtr = crate::wire::TcpRepr::parse(&p, None)
                .is_ok_and(|s| s.options.bth.is_some_and(|b| b.rtr));
            if dir == Direction::BtoA && rtr {
                credit.get_or_insert(p);
                return None;
            }
            Some(p)
        },
        |_| false,
    );
    assert_eq!(d.a.stats().bytes_sent, 0, "every credit update held");
    let real = credit.expect("B sent its credit update");
    let ip = d.b.cfg.ip;
    let mut far = crate::wire::TcpRepr::parse(&real, Some(ip)).expect("parses");
    far.seq = far.seq.wrapping_add(3 * d.a.cfg.recv_window);
    let far = far.to_vec(ip).expect("re-encode");
    let before = d.a.stats();
    d.a.handle_segment(d.now, &far);
    // A's answer draws B's credit again (B still owes it): kept off the wire here, so only
    // the forged segment could have moved A's credit.
    d.run(
        MS,
        |dir, _, p| (dir == Direction::AtoB).then_some(p),
        |_| false,
    );
    let s = d.a.stats();
    assert_eq!(s.malformed, before.malformed, "{s:?}");
    assert_eq!(s.late_credit_kept, before.late_credit_kept, "{s:?}");
    assert_eq!(s.bytes_sent, 0, "the forged credit let the SEND go: {s:?}");
    d.a.handle_segment(d.now, &real);
    d.settle(10 * MS);
    assert_eq!(d.a.stats().bytes_sent, 500);
}
