//! Receiver-driven admission (`conn/admission.rs`): the data receiver's R=1 grant is computed
//! from what it has posted (plus its allowance), and the data sender keeps what it sends within
//! it. In these tests B sends data and A receives, so A's handshake ACK already carries its
//! first grant and every byte B sends is governed by one.

use super::*;
use bth_placement::{Access, WcStatus};

/// The grants A advertises, watched on the wire, and how far B's data ever went past the
/// newest edge A had sent (B cannot know of a later one; the tests' edges never shrink).
#[derive(Default)]
struct Watch {
    /// Sequence number one past the last byte A's newest grant admits.
    edge: Option<u32>,
    /// Every grant seen, in bytes.
    grants: Vec<u64>,
    /// Most bytes any B data segment ended beyond the edge (negative: within it).
    excess: Option<i64>,
    /// A's R=1 segments dropped by the test.
    dropped: u32,
}

impl Watch {
    /// Look at one segment; drop A's next R=1 if `drop_grants` says so. Returns the segment
    /// to deliver.
    fn see(&mut self, dir: Direction, p: Vec<u8>, drop_grant: bool) -> Option<Vec<u8>> {
        let Ok(s) = TcpRepr::parse(&p, None) else {
            return Some(p);
        };
        let Some(b) = s.options.bth else {
            return Some(p);
        };
        match dir {
            Direction::AtoB if b.rtr => {
                if drop_grant {
                    self.dropped += 1;
                    return None;
                }
                let bytes = bth_cc::ReceiverAdmission::units_to_bytes(b.mbo);
                self.grants.push(bytes);
                self.edge = Some(s.ack.wrapping_add(bytes as u32));
            }
            Direction::BtoA if !s.payload.is_empty() => {
                if let Some(edge) = self.edge {
                    let end = s.seq.wrapping_add(s.payload.len() as u32);
                    let over = i64::from(end.wrapping_sub(edge) as i32);
                    self.excess = Some(self.excess.map_or(over, |e| e.max(over)));
                }
            }
            _ => {}
        }
        Some(p)
    }
}

/// A registered region of `len` bytes at A that B may WRITE; B's WRITE of `data` at `offset`.
fn write_wr(mr: &bth_placement::MrHandle, wr_id: u64, offset: u64, data: Vec<u8>) -> WorkRequest {
    WorkRequest::write(wr_id, mr.rkey, mr.addr + offset, data, None)
}

/// Test configs with A's allowance (what A admits beyond posted buffers) and B's enforcement.
fn wire(allowance: u32, enforce: bool) -> BackToBack {
    let (mut a, mut b) = configs(true);
    a.admission_allowance = allowance;
    b.admission = enforce;
    BackToBack::established(a, b, MS)
}

/// 1 MiB of WRITEs into a receiver that admits 16 KiB beyond its (no) posted buffers: every
/// data segment stays within the newest grant, the WRITEs complete, and the grant held the
/// sender back (slow start would have taken cwnd far beyond 16 KiB). With enforcement off the
/// same run goes past the grant: that is what the first half checks.
#[test]
fn sender_never_exceeds_the_grant_in_flight() {
    let run = |enforce: bool| {
        let mut d = wire(16 << 10, enforce);
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let mr = d.a.register_mr(vec![0; 1 << 20], access).unwrap();
        for i in 0..64u64 {
            let wr = write_wr(&mr, i, i * 16384, pattern(i as u8, 16384));
            d.b.post_send(wr).unwrap();
        }
        let mut w = Watch::default();
        let mut done = 0;
        let ok = d.run(
            Duration::from_secs(5),
            |dir, _, p| w.see(dir, p, false),
            |d| {
                while let Some(c) = d.b.poll_completion() {
                    assert_eq!(c.status, WcStatus::Success);
                    done += 1;
                }
                done == 64
            },
        );
        assert!(ok, "{done} of 64 WRITEs");
        assert_eq!(d.a.mr_bytes(mr.rkey).unwrap()[..16384], pattern(0, 16384));
        (w, d.b.stats())
    };
    let (w, stats) = run(true);
    assert!(
        w.excess.is_some_and(|e| e <= 0),
        "past the grant: {:?}",
        w.excess
    );
    assert!(w.grants.iter().all(|&g| g <= 20 << 10), "{:?}", w.grants);
    assert!(
        stats.grant_holds > 0 && stats.grant_held > Duration::ZERO,
        "{stats:?}"
    );

    let (w, stats) = run(false);
    assert!(w.excess.is_some_and(|e| e > 0), "{:?}", w.excess);
    assert_eq!(stats.grant_holds, 0);
}

/// With no allowance, A's grant is exactly its unfilled posted receives: 0 at first, then
/// 64 KiB, then 192 KiB as receives are posted, each increase sent at once (R=1). The SENDs
/// that use them stay within the grant.
#[test]
fn grant_grows_when_receives_are_posted() {
    let mut d = wire(0, true);
    assert_eq!(
        d.b.snd.admission.grant(),
        Some(0),
        "the handshake ACK grants nothing"
    );
    let mut w = Watch::default();
    d.a.post_recv(1, vec![0; 65536]).unwrap();
    d.run(
        Duration::from_millis(5),
        |dir, _, p| w.see(dir, p, false),
        |_| false,
    );
    assert_eq!(w.grants, [65536]);
    d.a.post_recv(2, vec![0; 65536]).unwrap();
    d.a.post_recv(3, vec![0; 65536]).unwrap();
    d.run(
        Duration::from_millis(5),
        |dir, _, p| w.see(dir, p, false),
        |_| false,
    );
    assert_eq!(w.grants, [65536, 3 * 65536]);
    assert_eq!(d.b.snd.admission.grant(), Some(3 * 65536));
    for i in 0..3u64 {
        d.b.post_send(WorkRequest::send(i, pattern(i as u8, 65536), None))
            .unwrap();
    }
    let mut done = 0;
    let ok = d.run(
        Duration::from_secs(5),
        |dir, _, p| w.see(dir, p, false),
        |d| {
            while let Some(c) = d.a.poll_completion() {
                assert_eq!((c.status, c.byte_len), (WcStatus::Success, 65536));
                done += 1;
            }
            done == 3
        },
    );
    assert!(ok, "{done} of 3 receives");
    assert!(w.excess.is_some_and(|e| e <= 0), "{:?}", w.excess);
}

/// A zero grant holds a WRITE back; the receive posted next raises the grant, and that R=1 is
/// lost. The sender's probe (persist, at twice the RTT for a grant) draws the grant again and
/// the WRITE goes through; it would wait forever otherwise.
#[test]
fn zero_grant_recovers_via_probe_after_a_lost_grant_update() {
    let mut d = wire(0, true);
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let mr = d.a.register_mr(vec![0; 32768], access).unwrap();
    d.b.post_send(write_wr(&mr, 9, 0, pattern(3, 32768)))
        .unwrap();
    let mut w = Watch::default();
    d.run(
        Duration::from_millis(5),
        |dir, _, p| w.see(dir, p, false),
        |_| false,
    );
    assert_eq!(d.b.stats().grant_holds, 1, "held by the zero grant");
    assert_eq!(
        d.a.mr_bytes(mr.rkey).unwrap(),
        vec![0; 32768],
        "nothing sent"
    );
    // A receive of 64 KiB: the grant covers the WRITE too (one grant for all bytes).
    d.a.post_recv(1, vec![0; 65536]).unwrap();
    let ok = d.run(
        Duration::from_secs(5),
        |dir, _, p| {
            let drop = w.dropped == 0;
            w.see(dir, p, drop)
        },
        |d| d.b.poll_completion().is_some(),
    );
    assert!(ok && w.dropped == 1, "the WRITE never got its grant");
    assert_eq!(d.a.mr_bytes(mr.rkey).unwrap(), pattern(3, 32768));
    assert!(w.excess.is_some_and(|e| e <= 0), "{:?}", w.excess);
    let s = d.b.stats();
    assert!(s.grant_holds >= 1 && s.grant_held > Duration::ZERO, "{s:?}");
}

/// A READ's response is data the requester receives: its sink joins the requester's grant,
/// so with no allowance at all the response still gets through (a grant of 0 would hold it).
#[test]
fn a_read_response_is_admitted_by_its_sink() {
    let (mut a, b) = configs(true);
    a.admission_allowance = 0;
    let mut d = BackToBack::established(a, b, MS);
    let mr =
        d.b.register_mr(pattern(5, 100_000), Access::REMOTE_READ)
            .unwrap();
    // A reads from B: here B is the data sender, A the data receiver.
    d.a.post_read(1, mr.rkey, mr.addr, vec![0; 100_000])
        .unwrap();
    let mut w = Watch::default();
    let mut got = None;
    let ok = d.run(
        Duration::from_secs(5),
        |dir, _, p| w.see(dir, p, false),
        |d| {
            got = got.take().or_else(|| d.a.poll_completion());
            got.is_some()
        },
    );
    assert!(ok, "the READ never completed");
    let c = got.unwrap();
    assert_eq!(c.status, WcStatus::Success);
    assert_eq!(c.buf.unwrap(), pattern(5, 100_000));
    assert!(w.grants.contains(&(25 * 4096)), "{:?}", w.grants);
    assert!(w.excess.is_some_and(|e| e <= 0), "{:?}", w.excess);
}

/// WRITE-only traffic to a receiver that never posts anything flows on the allowance (the
/// default), sliding with what arrives: R=1 updates keep coming without any post.
#[test]
fn writes_without_receives_flow_on_the_allowance() {
    let mut d = wire(64 << 10, true);
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let mr = d.a.register_mr(vec![0; 1 << 20], access).unwrap();
    d.b.post_send(write_wr(&mr, 1, 0, pattern(8, 1 << 20)))
        .unwrap();
    let mut w = Watch::default();
    let ok = d.run(
        Duration::from_secs(5),
        |dir, _, p| w.see(dir, p, false),
        |d| d.b.poll_completion().is_some(),
    );
    assert!(ok, "the WRITE never completed");
    assert_eq!(d.a.mr_bytes(mr.rkey).unwrap(), pattern(8, 1 << 20));
    // 1 MiB through a 64 KiB allowance: at least one update per half allowance.
    assert!(w.grants.len() >= 16, "{} grants", w.grants.len());
    assert!(w.excess.is_some_and(|e| e <= 0), "{:?}", w.excess);
}
