//! RDMA READ posting and answering: refusals leave no trace, and nothing hangs silently.

use super::*;
use bth_placement::{Access, WcStatus};

/// B exposes 64 KiB of known bytes for A to read.
fn with_source(d: &mut BackToBack) -> (u32, u64, Vec<u8>) {
    let data = pattern(9, 64 * 1024);
    let mr = d.b.register_mr(data.clone(), Access::REMOTE_READ).unwrap();
    (mr.rkey, mr.addr, data)
}

fn read_completions(d: &mut BackToBack, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    let ok = d.run(Duration::from_secs(5), pass, |d| {
        while let Some(c) = d.a.poll_completion() {
            out.push(c);
        }
        out.len() >= n
    });
    assert!(ok, "{} of {n} READs completed: {:?}", out.len(), d.a);
    out
}

/// Placement holds at most 1024 outstanding READs. The 1025th is refused, and refusing it
/// consumed no MSN and sent no request: once the first 1024 complete, READs work again (they
/// used to fail with `NotNextMsn` for good, each failure still sending a request).
#[test]
fn post_read_refused_when_full_leaves_no_trace() {
    let mut d = established(true);
    let (rkey, addr, data) = with_source(&mut d);
    let limit = d.a.test_placement().limits().max_inflight;
    for i in 0..limit {
        d.a.post_read(i as u64, rkey, addr + i as u64, vec![0; 16])
            .unwrap_or_else(|e| panic!("READ {i}: {e}"));
    }
    let end = d.a.snd.framer.stream_end();
    let next = d.a.snd.framer.next_msn(MsgClass::ReadRequest);
    let refused = d.a.post_read(9999, rkey, addr, vec![5; 16]);
    let refused = refused.expect_err("READ beyond placement's window accepted");
    assert_eq!(refused.buf, vec![5; 16], "the sink comes back");
    assert_eq!(
        d.a.snd.framer.stream_end(),
        end,
        "a refused READ queued a request"
    );
    assert_eq!(d.a.snd.framer.next_msn(MsgClass::ReadRequest), next);
    let done = read_completions(&mut d, limit);
    assert!(done.iter().all(|c| c.status == WcStatus::Success));
    // The class still works.
    let msn = d.a.post_read(7, rkey, addr + 100, vec![0; 32]).unwrap();
    let c = read_completions(&mut d, 1).remove(0);
    assert_eq!((c.wr_id, c.msn, c.status), (7, msn, WcStatus::Success));
    assert_eq!(c.buf.as_deref(), Some(&data[100..132]));
}

/// A READ whose response would be longer than we accept (the largest message we announced)
/// is refused at post time; it used to be accepted, the responder dropped the response and
/// both ends stayed Established with nothing completing.
#[test]
fn read_longer_than_we_accept_is_refused_at_post() {
    let (mut a, b) = configs(true);
    a.max_message_len = 4096;
    let mut d = BackToBack::established(a, b, MS);
    let (rkey, addr, _) = with_source(&mut d);
    let end = d.a.snd.framer.stream_end();
    let e = d.a.post_read(1, rkey, addr, vec![3; 8192]).unwrap_err();
    assert_eq!(
        e.kind,
        CallError::Post(bth_framer::WrError::ReadTooLarge {
            len: 8192,
            max: 4096
        })
    );
    assert_eq!(e.buf, vec![3; 8192], "the sink comes back");
    assert_eq!(d.a.snd.framer.stream_end(), end);
    // At the limit it works.
    d.a.post_read(2, rkey, addr, vec![0; 4096]).unwrap();
    let c = read_completions(&mut d, 1).remove(0);
    assert_eq!((c.wr_id, c.status), (2, WcStatus::Success));
}

/// A responder that cannot frame a response (here: a requester that asks for more than it
/// announced, simulated by lowering what B believes A accepts) fails the QP with an RST, so
/// the requester's READ completes with an error instead of never.
#[test]
fn unanswerable_read_fails_both_sides_instead_of_hanging() {
    let mut d = established(true);
    let (rkey, addr, _) = with_source(&mut d);
    d.b.snd.framer.set_max_message_len(100);
    let msn = d.a.post_read(1, rkey, addr, vec![0; 1000]).unwrap();
    let c = read_completions(&mut d, 1).remove(0);
    assert_eq!(c.wr_id, 1);
    // The RST carries a NAK naming the READ: the requester gets IB RC's status for it.
    assert_eq!(c.status, WcStatus::RemoteInvalidRequest);
    assert_eq!(c.buf.map(|b| b.len()), Some(1000), "the sink comes back");
    assert_eq!(d.b.stats().read_responses_refused, 1);
    assert_eq!(d.b.error(), Some(ConnectionError::RemoteInvalidRequest));
    let nak = crate::wire::Nak {
        code: crate::wire::NakCode::InvalidRequest,
        opcode: Opcode::RdmaReadRequest,
        msn,
    };
    assert_eq!(d.a.error(), Some(ConnectionError::PeerNak(nak)));
}
