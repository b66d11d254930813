//! What `post` accepts and refuses, and how MSNs are assigned.

use bth_framer::{Framer, FramerConfig, Posted, WorkRequest, WrError, WrOp, MAX_IN_FLIGHT};
use bth_wire::{MsgClass, MAX_MESSAGE_LEN};
use bytes::Bytes;

fn framer(first_msn: u16, max_message_len: u32) -> Framer {
    Framer::new(FramerConfig {
        mss: 1448,
        first_msn,
        max_message_len,
    })
}

fn send(sg_list: Vec<Bytes>) -> WorkRequest {
    WorkRequest {
        wr_id: 1,
        op: WrOp::Send { imm: None },
        sg_list,
    }
}

fn read(len: u32) -> WorkRequest {
    WorkRequest {
        wr_id: 2,
        op: WrOp::RdmaRead {
            rkey: 1,
            remote_addr: 0x1000,
            len,
        },
        sg_list: Vec::new(),
    }
}

/// A refused post must leave no trace: no stream space, no MSN, no queued message.
fn assert_untouched(f: &Framer, first_msn: u16) {
    assert_eq!(f.stream_end(), 0);
    assert!(f.is_empty());
    for c in [MsgClass::Send, MsgClass::Write, MsgClass::ReadRequest] {
        assert_eq!(f.next_msn(c), Some(first_msn));
        assert_eq!(f.in_flight(c), 0);
    }
}

#[test]
fn two_to_the_24_bytes_is_refused_not_truncated() {
    let half = Bytes::from(vec![7u8; 1 << 23]);
    let mut f = framer(5, MAX_MESSAGE_LEN);
    assert_eq!(
        f.post(send(vec![half.clone(), half.clone()])),
        Err(WrError::TooLarge {
            len: 1 << 24,
            max: MAX_MESSAGE_LEN
        })
    );
    assert_untouched(&f, 5);
    // One byte less is the largest message there is.
    let p = f
        .post(send(vec![half.clone(), half.slice(1..)]))
        .expect("2^24 - 1 bytes");
    assert_eq!(p.stream_len, MAX_MESSAGE_LEN);
    let last = f.segment_at(u64::from(MAX_MESSAGE_LEN) - 1, 1448).unwrap();
    assert_eq!((last.bth.mbo, last.len), (MAX_MESSAGE_LEN - 1, 1));
}

#[test]
fn peer_limit_is_enforced_for_every_data_class() {
    let mut f = framer(0, 1000);
    let big = Bytes::from(vec![1u8; 1001]);
    let over = WrError::TooLarge {
        len: 1001,
        max: 1000,
    };
    assert_eq!(f.post(send(vec![big.clone()])), Err(over));
    let write = WorkRequest {
        wr_id: 3,
        op: WrOp::RdmaWrite {
            rkey: 1,
            remote_addr: 0,
            imm: Some(1),
        },
        sg_list: vec![big.slice(..500), big.slice(500..)],
    };
    assert_eq!(f.post(write), Err(over));
    assert_eq!(f.post_read_response(9, vec![big.clone()], false), Err(over));
    assert_untouched(&f, 0);
    assert_eq!(f.post(send(vec![big.slice(1..)])).unwrap().stream_len, 1000);

    // A limit learned later applies to later posts; the hello's 24 bits cannot say more.
    f.set_max_message_len(u32::MAX);
    assert_eq!(f.max_message_len(), MAX_MESSAGE_LEN);
    f.set_max_message_len(10);
    assert!(matches!(
        f.post(send(vec![big.slice(..11)])),
        Err(WrError::TooLarge { len: 11, max: 10 })
    ));
}

#[test]
fn config_above_the_wire_limit_is_clamped() {
    let f = framer(0, u32::MAX);
    assert_eq!(f.max_message_len(), MAX_MESSAGE_LEN);
}

#[test]
fn empty_reads_are_refused() {
    let mut f = framer(0, MAX_MESSAGE_LEN);
    assert_eq!(f.post_read_response(1, vec![], false), Err(WrError::Empty));
    assert_eq!(f.post(read(0)), Err(WrError::ReadEmpty));
    assert_untouched(&f, 0);
}

#[test]
fn zero_length_send_takes_one_pad_byte_of_stream() {
    let mut f = framer(0, MAX_MESSAGE_LEN);
    let p = f
        .post(send(vec![Bytes::new(), Bytes::new()]))
        .expect("zero-length SEND is a valid work request");
    assert_eq!((p.stream_start, p.stream_len), (0, 1));
    let seg = f.segment_at(0, 1000).expect("one segment");
    assert_eq!(seg.len, 1);
    assert_eq!(seg.bth.mbo, bth_wire::ZERO_LENGTH_MBO);
    assert_eq!(seg.bth.opcode, bth_wire::Opcode::SendOnly);
    let released = f.release(1);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].len, 0, "the application posted no bytes");
}

#[test]
fn empty_entries_are_skipped() {
    let mut f = framer(0, MAX_MESSAGE_LEN);
    // Empty entries between real ones are simply skipped.
    let p = f
        .post(send(vec![
            Bytes::new(),
            Bytes::from_static(b"ab"),
            Bytes::new(),
        ]))
        .unwrap();
    assert_eq!(p.stream_len, 2);
    let d = f.segment_at(0, 100).unwrap();
    assert_eq!(&d.payload_bytes()[..], b"ab");
}

#[test]
fn bad_read_requests_are_refused() {
    let mut f = framer(0, 100);
    assert_eq!(
        f.post(read(MAX_MESSAGE_LEN + 1)),
        Err(WrError::ReadTooLarge {
            len: MAX_MESSAGE_LEN + 1,
            max: MAX_MESSAGE_LEN
        })
    );
    let mut with_data = read(4);
    with_data.sg_list = vec![Bytes::from_static(b"x")];
    assert_eq!(f.post(with_data), Err(WrError::ReadWithData { entries: 1 }));
    let wraps = WorkRequest {
        op: WrOp::RdmaRead {
            rkey: 1,
            remote_addr: u64::MAX,
            len: 2,
        },
        ..read(2)
    };
    assert_eq!(
        f.post(wraps),
        Err(WrError::RemoteRangeWraps {
            addr: u64::MAX,
            len: 2
        })
    );
    assert_untouched(&f, 0);
    // The READ length is bounded by what the requester accepts, not by the peer's limit.
    assert_eq!(f.post(read(MAX_MESSAGE_LEN)).unwrap().stream_len, 16);
}

#[test]
fn write_whose_remote_range_wraps_is_refused() {
    let mut f = framer(0, MAX_MESSAGE_LEN);
    let wr = |remote_addr| WorkRequest {
        wr_id: 1,
        op: WrOp::RdmaWrite {
            rkey: 1,
            remote_addr,
            imm: None,
        },
        sg_list: vec![Bytes::from_static(b"abcd")],
    };
    assert_eq!(
        f.post(wr(u64::MAX - 2)),
        Err(WrError::RemoteRangeWraps {
            addr: u64::MAX - 2,
            len: 4
        })
    );
    // The last byte at u64::MAX is still addressable.
    f.post(wr(u64::MAX - 3)).unwrap();
    let d = f.segment_at(3, 1).unwrap();
    assert_eq!(d.bth.ext.reth().unwrap().addr, u64::MAX);
}

#[test]
fn msns_are_per_class_and_wrap() {
    let mut f = framer(0xFFFE, MAX_MESSAGE_LEN);
    let one = || vec![Bytes::from_static(b"z")];
    let write = || WorkRequest {
        wr_id: 7,
        op: WrOp::RdmaWrite {
            rkey: 1,
            remote_addr: 0,
            imm: None,
        },
        sg_list: one(),
    };
    let mut msns = Vec::new();
    for _ in 0..3 {
        msns.push((
            f.post(send(one())).unwrap().class,
            f.next_msn(MsgClass::Send),
        ));
    }
    assert_eq!(
        msns.iter().map(|m| m.1).collect::<Vec<_>>(),
        vec![Some(0xFFFF), Some(0), Some(1)]
    );
    let w = f.post(write()).unwrap();
    let r = f.post(read(8)).unwrap();
    assert_eq!((w.class, w.msn), (MsgClass::Write, 0xFFFE));
    assert_eq!(
        (r.class, r.msn, r.stream_start),
        (MsgClass::ReadRequest, 0xFFFE, 4)
    );
    assert_eq!(f.next_msn(MsgClass::Send), Some(1));
    assert_eq!(f.next_msn(MsgClass::ReadResponse), None);
}

#[test]
fn read_response_echoes_the_request_msn_and_advances_nothing() {
    let mut f = framer(40, MAX_MESSAGE_LEN);
    f.post(send(vec![Bytes::from_static(b"abc")])).unwrap();
    let p = f
        .post_read_response(
            0x1234,
            vec![Bytes::from_static(b"hello"), Bytes::from_static(b"!")],
            false,
        )
        .unwrap();
    assert_eq!(
        p,
        Posted {
            class: MsgClass::ReadResponse,
            msn: 0x1234,
            stream_start: 3,
            stream_len: 6,
            wr_id: 0
        }
    );
    for c in [MsgClass::Write, MsgClass::ReadRequest] {
        assert_eq!(f.next_msn(c), Some(40));
    }
    assert_eq!(f.next_msn(MsgClass::Send), Some(41));
    assert_eq!(f.in_flight(MsgClass::ReadResponse), 1);
}

#[test]
fn a_class_may_not_exceed_two_to_the_15_in_flight() {
    let mut f = framer(0xFF00, MAX_MESSAGE_LEN);
    let b = Bytes::from_static(b"q");
    for _ in 0..MAX_IN_FLIGHT {
        f.post(send(vec![b.clone()])).unwrap();
    }
    let full = f.stream_end();
    assert_eq!(
        f.post(send(vec![b.clone()])),
        Err(WrError::TooManyInFlight {
            class: MsgClass::Send
        })
    );
    assert_eq!(f.stream_end(), full);
    assert_eq!(
        f.next_msn(MsgClass::Send),
        Some(0xFF00u16.wrapping_add(0x8000))
    );
    // Other classes have their own budget.
    f.post(read(1)).unwrap();
    // Releasing the oldest makes room for exactly one more.
    assert_eq!(f.release(1).len(), 1);
    f.post(send(vec![b.clone()])).unwrap();
    assert!(f.post(send(vec![b])).is_err());
}

#[test]
fn msns_keep_counting_across_many_wraps_with_releases() {
    let mut f = framer(0x7FFF, MAX_MESSAGE_LEN);
    let b = Bytes::from_static(b"m");
    let mut want = 0x7FFFu16;
    for i in 0..200_000u64 {
        let p = f.post(send(vec![b.clone()])).unwrap();
        assert_eq!((p.msn, p.stream_start), (want, i));
        want = want.wrapping_add(1);
        if i % 1000 == 999 {
            assert_eq!(f.release(i + 1).len(), 1000);
        }
    }
    assert!(f.is_empty());
}
