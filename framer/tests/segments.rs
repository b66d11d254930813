//! Segment lookup, READ request framing, release, and the edge cases the stack relies on.

use bth_framer::{Framer, FramerConfig, Released, WorkRequest, WrOp};
use bth_wire::{Extension, Inbound, MsgClass, Opcode, ReadRequest, Reth, MAX_MESSAGE_LEN};
use bytes::Bytes;

fn framer(mss: u32) -> Framer {
    Framer::new(FramerConfig {
        mss,
        first_msn: 100,
        max_message_len: MAX_MESSAGE_LEN,
    })
}

fn send(wr_id: u64, data: &'static [u8], imm: Option<u32>) -> WorkRequest {
    WorkRequest {
        wr_id,
        op: WrOp::Send { imm },
        sg_list: vec![Bytes::from_static(data)],
    }
}

#[test]
fn read_request_is_one_16_byte_segment() {
    let mut f = framer(1448);
    f.post(send(1, b"0123456789", None)).unwrap();
    let p = f
        .post(WorkRequest {
            wr_id: 9,
            op: WrOp::RdmaRead {
                rkey: 0xAABB,
                remote_addr: 0x1122_3344_5566_7788,
                len: 65536,
            },
            sg_list: vec![],
        })
        .unwrap();
    assert_eq!(
        (p.class, p.msn, p.stream_start, p.stream_len),
        (MsgClass::ReadRequest, 100, 10, 16)
    );
    assert_eq!(f.stream_end(), 26);

    let d = f.segment_at(10, 1448).unwrap();
    assert_eq!(
        (d.len, d.bth.opcode, d.bth.ext),
        (16, Opcode::RdmaReadRequest, Extension::None)
    );
    assert_eq!((d.wr_id, d.class), (9, MsgClass::ReadRequest));
    let payload = d.payload_bytes();
    let req = ReadRequest::parse(&payload).unwrap();
    assert_eq!(
        req,
        ReadRequest {
            rkey: 0xAABB,
            addr: 0x1122_3344_5566_7788,
            len: 65536
        }
    );
    let inb = Inbound::from_bth(&d.bth, &payload).unwrap();
    assert_eq!(
        (inb.class, inb.msn, inb.last),
        (MsgClass::ReadRequest, 100, true)
    );

    // There is no opcode for part of a request: no cut below 16 bytes, none mid-request.
    assert!(f.segment_at(10, 15).is_none());
    assert!(f.segment_at(11, 1448).is_none());
    assert!(f.segment_at(25, 1448).is_none());
    // The budget ending at the request does not pull its bytes into the SEND before it.
    assert_eq!(f.segment_at(0, 1448).unwrap().len, 10);
}

#[test]
fn read_response_segments_use_read_response_opcodes() {
    let mut f = framer(4);
    f.post_read_response(7, vec![Bytes::from_static(b"abcdefghij")], false)
        .unwrap();
    let ops: Vec<_> = [0u64, 4, 8]
        .iter()
        .map(|&o| {
            let d = f.segment_at(o, 4).unwrap();
            (d.bth.opcode, d.bth.msn, d.bth.seg, d.wr_id, d.staged)
        })
        .collect();
    assert_eq!(
        ops,
        vec![
            (Opcode::RdmaReadResponseFirst, 7, 0, 0, false),
            (Opcode::RdmaReadResponseMiddle, 7, 1, 0, false),
            (Opcode::RdmaReadResponseLast, 7, 2, 0, false),
        ]
    );
}

/// A staged message's segments say so (retransmissions too), and only its own: the sender
/// sends them with no second copy.
#[test]
fn staged_messages_mark_their_segments() {
    let mut f = framer(4);
    f.post_read_response(7, vec![Bytes::from_static(b"abcdefgh")], true)
        .unwrap();
    f.post(WorkRequest {
        wr_id: 1,
        op: WrOp::Send { imm: None },
        sg_list: vec![Bytes::from_static(b"ijkl")],
    })
    .unwrap();
    f.post_staged(WorkRequest {
        wr_id: 2,
        op: WrOp::Send { imm: None },
        sg_list: vec![Bytes::from_static(b"mnop")],
    })
    .unwrap();
    let staged: Vec<_> = [0u64, 4, 8, 12, 4]
        .iter()
        .map(|&o| f.segment_at(o, 4).unwrap().staged)
        .collect();
    assert_eq!(staged, [true, true, false, true, true]);
}

#[test]
fn write_with_immediate_carries_reth_everywhere_and_imm_on_last() {
    let mut f = framer(3);
    f.post(WorkRequest {
        wr_id: 5,
        op: WrOp::RdmaWrite {
            rkey: 77,
            remote_addr: 0x1000,
            imm: Some(0xDEAD),
        },
        sg_list: vec![Bytes::from_static(b"abcd"), Bytes::from_static(b"efgh")],
    })
    .unwrap();
    let first = f.segment_at(0, 3).unwrap();
    let middle = f.segment_at(3, 3).unwrap();
    let last = f.segment_at(6, 3).unwrap();
    assert_eq!(first.bth.opcode, Opcode::RdmaWriteFirst);
    assert_eq!(
        middle.bth.ext,
        Extension::Reth(Reth {
            rkey: 77,
            addr: 0x1003
        })
    );
    // The middle segment straddles the two sg entries without copying either.
    assert_eq!(middle.payload.len(), 2);
    assert_eq!(&middle.payload_bytes()[..], b"def");
    assert_eq!(last.bth.opcode, Opcode::RdmaWriteLastWithImmediate);
    assert_eq!(
        last.bth.ext,
        Extension::RethImmediate(
            Reth {
                rkey: 77,
                addr: 0x1006
            },
            0xDEAD
        )
    );
    let whole = f.segment_at(0, 100).unwrap();
    assert_eq!(whole.bth.opcode, Opcode::RdmaWriteOnlyWithImmediate);
}

#[test]
fn retransmission_keeps_the_original_segment_index() {
    let mut f = framer(1000);
    let data = Bytes::from(vec![3u8; 300_000]);
    f.post(WorkRequest {
        wr_id: 1,
        op: WrOp::Send { imm: None },
        sg_list: vec![data],
    })
    .unwrap();
    // Byte 256_500 belonged to original segment 256 (mod 256 = 0), whatever the new cut.
    let d = f.segment_at(256_500, 700).unwrap();
    assert_eq!((d.bth.mbo, d.bth.seg, d.len), (256_500, 0, 700));
    assert_eq!(d.bth.opcode, Opcode::SendMiddle);
    let d = f.segment_at(299_999, 700).unwrap();
    assert_eq!((d.bth.seg, d.len, d.bth.opcode), (43, 1, Opcode::SendLast));
}

#[test]
fn release_drops_only_whole_messages_in_order() {
    let mut f = framer(1448);
    f.post(send(1, b"aaaa", None)).unwrap(); // [0, 4)
    f.post(send(2, b"bbbbbb", Some(1))).unwrap(); // [4, 10)
    f.post(WorkRequest {
        wr_id: 3,
        op: WrOp::RdmaRead {
            rkey: 1,
            remote_addr: 0,
            len: 10,
        },
        sg_list: vec![],
    })
    .unwrap(); // [10, 26)

    assert!(f.release(3).is_empty());
    assert_eq!(f.released_up_to(), 0);
    assert!(f.segment_at(0, 10).is_some(), "partly acked message stays");

    let r = f.release(9);
    assert_eq!(
        r,
        vec![Released {
            wr_id: 1,
            class: MsgClass::Send,
            msn: 100,
            len: 4
        }]
    );
    assert_eq!(f.released_up_to(), 4);
    assert!(f.segment_at(3, 10).is_none(), "released offsets are gone");
    assert!(f.message_at(0).is_none());
    assert_eq!(
        f.message_at(9).map(|m| (m.wr_id, m.stream_start)),
        Some((2, 4))
    );

    // An old ACK changes nothing; a jump past the end releases the rest.
    assert!(f.release(2).is_empty());
    let r = f.release(u64::MAX);
    assert_eq!(
        r.iter()
            .map(|r| (r.wr_id, r.class, r.msn, r.len))
            .collect::<Vec<_>>(),
        vec![
            (2, MsgClass::Send, 101, 6),
            (3, MsgClass::ReadRequest, 100, 16)
        ]
    );
    assert!(f.is_empty());
    assert_eq!((f.released_up_to(), f.stream_end()), (26, 26));
    assert_eq!(f.in_flight(MsgClass::Send), 0);

    // Numbering and stream space continue after a full release.
    let p = f.post(send(4, b"c", None)).unwrap();
    assert_eq!((p.msn, p.stream_start), (102, 26));
}

#[test]
fn unknown_offsets_and_zero_budget_give_none() {
    let mut f = framer(1448);
    assert!(f.segment_at(0, 1448).is_none());
    assert!(f.message_at(0).is_none());
    f.post(send(1, b"abc", None)).unwrap();
    assert!(f.segment_at(0, 0).is_none());
    assert!(f.segment_at(3, 1448).is_none());
    assert!(f.segment_at(u64::MAX, u32::MAX).is_none());
    assert_eq!(f.segment_at(1, u32::MAX).unwrap().len, 2);
}

#[test]
fn zero_mss_does_not_divide_by_zero() {
    let mut f = framer(0);
    assert_eq!(f.mss(), 1);
    f.post(send(1, b"abcdef", None)).unwrap();
    assert_eq!(f.segment_at(5, 1).unwrap().bth.seg, 5);
}

#[test]
fn copy_payload_to_a_short_buffer_fills_it() {
    let mut f = framer(1448);
    f.post(WorkRequest {
        wr_id: 1,
        op: WrOp::Send { imm: None },
        sg_list: vec![Bytes::from_static(b"abc"), Bytes::from_static(b"def")],
    })
    .unwrap();
    let d = f.segment_at(1, 100).unwrap();
    let mut big = [0u8; 8];
    assert_eq!(d.copy_payload_to(&mut big), 5);
    assert_eq!(&big[..5], b"bcdef");
    let mut short = [0u8; 3];
    assert_eq!(d.copy_payload_to(&mut short), 3);
    assert_eq!(&short, b"bcd");
}

#[test]
fn lookup_finds_the_right_message_among_many() {
    let mut f = framer(1448);
    let data = Bytes::from_static(b"0123456789abcdef");
    // Lengths 1..=16 repeated: message starts are irregular, so a wrong bisection shows.
    let mut starts = Vec::new();
    for i in 0..5000u64 {
        let len = (i % 16 + 1) as usize;
        let p = f
            .post(WorkRequest {
                wr_id: i,
                op: WrOp::Send { imm: None },
                sg_list: vec![data.slice(..len)],
            })
            .unwrap();
        starts.push((p.stream_start, len as u64));
    }
    for (i, &(start, len)) in starts.iter().enumerate().step_by(7) {
        for off in [start, start + len - 1] {
            let d = f.segment_at(off, 1448).unwrap();
            assert_eq!(d.wr_id, i as u64);
            assert_eq!(d.stream_end(), start + len);
        }
    }
}
