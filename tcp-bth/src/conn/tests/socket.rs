//! One connection, segment in and segment out (smoltcp's `send!`/`recv!` style): the test plays
//! the peer by hand, writes every segment it sends field by field and checks every field of
//! what comes back. No second connection hides what is on the wire.

use super::*;
use crate::wire::{Bth, Extension, Nak, NakCode, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use bth_placement::WcStatus;

const T0: Duration = Duration::from_millis(1);
const PEER_ISS: u32 = 0x1000_0000;
const PEER_FIRST_MSN: u16 = 100;

/// A segment as the test writes or reads it.
struct Seg {
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    bth: Option<Bth>,
    payload: Vec<u8>,
}

/// The hand-played peer (B, port 4791) of the connection under test (A).
struct Peer {
    cfg: Config,
    /// A's ISS, learnt from its SYN.
    their_iss: u32,
    now: Duration,
}

impl Peer {
    /// Hand `s` to A (`recv!`), stamped with the peer's clock.
    fn send(&self, c: &mut Connection, s: Seg) {
        self.send_at(c, s, self.now.as_micros() as u32);
    }

    /// Hand `s` to A with this TSval.
    fn send_at(&self, c: &mut Connection, s: Seg, tsval: u32) {
        let mut bth = s.bth;
        if let Some(b) = &mut bth {
            b.timestamps = Some(Timestamps { tsval, tsecr: 0 });
            b.seal(&s.payload);
        }
        let repr = TcpRepr {
            src_port: B_PORT,
            dst_port: A_PORT,
            seq: s.seq,
            ack: s.ack,
            flags: s.flags,
            window: 65535,
            urgent: 0,
            options: TcpOptions {
                bth,
                ..Default::default()
            },
            payload: &s.payload,
        };
        c.handle_segment(self.now, &repr.to_vec(self.cfg.ip).unwrap());
    }

    /// A millisecond on, an RST at our first data byte carrying `nak` (no ACK: an RST needs
    /// none).
    fn send_nak_rst(&mut self, c: &mut Connection, nak: Nak) {
        self.now += MS;
        let rst = Seg {
            seq: PEER_ISS + 1,
            ack: 0,
            flags: TcpFlags::RST,
            bth: Some(nak.to_bth()),
            payload: Vec::new(),
        };
        self.send(c, rst);
    }

    /// A segment of ours at our first data byte, acknowledging A's SYN.
    fn seg(&self, flags: TcpFlags, bth: Bth, payload: &[u8]) -> Seg {
        Seg {
            seq: PEER_ISS + 1,
            ack: self.their_iss.wrapping_add(1),
            flags,
            bth: Some(bth),
            payload: payload.to_vec(),
        }
    }

    /// The next segment A sends (`send!`), parsed with its checksum checked.
    fn recv(&self, c: &mut Connection) -> Seg {
        let bytes = c.poll_transmit(self.now).expect("a segment");
        let r = TcpRepr::parse(&bytes, Some(self.cfg.ip.reversed())).expect("valid segment");
        if let Some(b) = &r.options.bth {
            assert!(b.icrc_ok(r.payload), "ICRC");
        }
        Seg {
            seq: r.seq,
            ack: r.ack,
            flags: r.flags,
            bth: r.options.bth,
            payload: r.payload.to_vec(),
        }
    }
}

/// A connected to the hand-played peer: SYN out, SYN-ACK (hello, first MSN 100) in, ACK out.
fn connected() -> (Connection, Peer) {
    let (a_cfg, b_cfg) = configs(true);
    let mut c = Connection::connect(a_cfg, T0);
    let mut p = Peer {
        cfg: b_cfg,
        their_iss: 0,
        now: T0,
    };
    let syn = p.recv(&mut c);
    assert!(syn.flags.syn() && !syn.flags.ack());
    let hello = syn.bth.expect("hello on the SYN");
    assert_eq!((hello.opcode, hello.msn), (Opcode::Hello, 0));
    p.their_iss = syn.seq;
    let mut h = Bth::new(Opcode::Hello);
    h.msn = PEER_FIRST_MSN;
    h.mbo = 1 << 20;
    p.now += MS;
    p.send(
        &mut c,
        Seg {
            seq: PEER_ISS,
            ack: syn.seq.wrapping_add(1),
            flags: TcpFlags::SYN | TcpFlags::ACK,
            bth: Some(h),
            payload: Vec::new(),
        },
    );
    assert_eq!(
        c.mode(),
        Mode::Bth {
            peer_first_msn: PEER_FIRST_MSN,
            peer_max_message: 1 << 20
        }
    );
    let ack = p.recv(&mut c);
    assert_eq!(
        (ack.seq, ack.ack, ack.flags.ack()),
        (syn.seq.wrapping_add(1), PEER_ISS + 1, true)
    );
    assert!(c.poll_transmit(p.now).is_none());
    (c, p)
}

/// A receive posted at A is credit, numbered in the peer's MSN space: R=1 with MSN 100 (the
/// peer's first). The SEND that uses it is acknowledged with R=0 and completed MSN 100.
#[test]
fn credit_then_completed_msn_on_pure_acks() {
    let (mut c, mut p) = connected();
    c.post_recv(7, vec![0; 16]).unwrap();
    let credit = p.recv(&mut c);
    let b = credit.bth.expect("BTH");
    assert_eq!(
        (b.opcode, b.rtr, b.msn, b.seg),
        (Opcode::Acknowledge, true, 100, 0)
    );
    assert!(c.poll_transmit(p.now).is_none(), "one credit update");

    let mut send = Bth::new(Opcode::SendOnly);
    send.msn = PEER_FIRST_MSN;
    p.now += MS;
    let data = p.seg(TcpFlags::ACK | TcpFlags::PSH, send, b"hello, placement");
    p.send(&mut c, data);
    let ack = p.recv(&mut c);
    let b = ack.bth.expect("BTH");
    assert_eq!(ack.ack, PEER_ISS + 1 + 16);
    assert_eq!((b.rtr, b.msn, b.seg, b.mbo), (false, 100, 0, 0));
    let done = c.poll_completion().expect("receive completes");
    assert_eq!(
        (done.wr_id, done.op, done.msn, done.byte_len),
        (7, WcOp::Recv, 100, 16)
    );
    assert_eq!(done.buf.as_deref(), Some(&b"hello, placement"[..]));
}

/// A zero-length SEND_ONLY_WITH_IMMEDIATE goes out as one segment of one pad byte with the
/// offset field 0xFFFFFF, and completes at A once that byte is acknowledged.
#[test]
fn zero_length_send_on_the_wire() {
    let (mut c, mut p) = connected();
    p.now += MS;
    // Credit for MSN 0 and a grant of one 4 KiB unit (a grant of 0 would admit nothing).
    let credit = Bth {
        rtr: true,
        msn: 0,
        mbo: 1,
        ..Bth::new(Opcode::Acknowledge)
    };
    let credit = p.seg(TcpFlags::ACK, credit, &[]);
    p.send(&mut c, credit);
    c.post_send(WorkRequest {
        wr_id: 5,
        op: WrOp::Send { imm: Some(42) },
        sg_list: Vec::new(),
    })
    .unwrap();
    let seg = p.recv(&mut c);
    let b = seg.bth.expect("BTH");
    assert_eq!(seg.payload, [0], "one pad byte");
    assert_eq!(b.opcode, Opcode::SendOnlyWithImmediate);
    assert_eq!((b.msn, b.mbo, b.seg), (0, crate::wire::ZERO_LENGTH_MBO, 0));
    assert_eq!(b.ext, Extension::Immediate(42));
    p.now += MS;
    p.send(
        &mut c,
        Seg {
            seq: PEER_ISS + 1,
            ack: seg.seq.wrapping_add(1),
            flags: TcpFlags::ACK,
            bth: Some(Bth::new(Opcode::Acknowledge)),
            payload: Vec::new(),
        },
    );
    let done = c.poll_completion().expect("SEND completes");
    assert_eq!(
        (done.wr_id, done.op, done.byte_len, done.status),
        (5, WcOp::Send, 0, WcStatus::Success)
    );
}

/// An RST carrying a NAK for our WRITE MSN 0 (remote access error) completes exactly that
/// WRITE with `RemoteAccessError`; the SEND posted after it is flushed.
#[test]
fn nak_on_rst_completes_the_named_work_request() {
    let (mut c, mut p) = connected();
    let write = WorkRequest {
        wr_id: 1,
        op: WrOp::RdmaWrite {
            rkey: 0xbad,
            remote_addr: 0,
            imm: None,
        },
        sg_list: vec![Bytes::from_static(b"0123456789")],
    };
    assert_eq!(c.post_send(write).unwrap(), 0);
    c.post_send(WorkRequest::send(2, vec![1; 10], None))
        .unwrap();
    let w = p.recv(&mut c);
    assert_eq!(w.bth.map(|b| b.opcode), Some(Opcode::RdmaWriteOnly));
    let nak = Nak {
        code: NakCode::RemoteAccess,
        opcode: Opcode::RdmaWriteOnly,
        msn: 0,
    };
    p.send_nak_rst(&mut c, nak);
    assert_eq!(c.error(), Some(ConnectionError::PeerNak(nak)));
    let got: Vec<_> = std::iter::from_fn(|| c.poll_completion())
        .map(|x| (x.wr_id, x.op, x.status))
        .collect();
    assert_eq!(
        got,
        [
            (1, WcOp::RdmaWrite, WcStatus::RemoteAccessError),
            (2, WcOp::Send, WcStatus::WrFlushError),
        ]
    );
}

/// A forged RST whose NAK names a message never sent completes nothing as delivered: the
/// messages before it were not acknowledged (one was never sent either), so they flush.
#[test]
fn nak_naming_an_unsent_message_acknowledges_nothing() {
    let (mut c, mut p) = connected();
    // WRITEs: they need no receive credit from the peer, so MSN 0 goes out at once.
    for id in 1..=3 {
        c.post_send(WorkRequest::write(id, 7, 0, vec![id as u8; 10], None))
            .unwrap();
    }
    let first = p.recv(&mut c);
    assert_eq!(first.bth.map(|b| b.msn), Some(0), "only MSN 0 went out");
    let nak = Nak {
        code: NakCode::RemoteOperational,
        opcode: Opcode::RdmaWriteOnly,
        msn: 2,
    };
    p.send_nak_rst(&mut c, nak);
    assert!(c.error().is_some());
    let got: Vec<_> = std::iter::from_fn(|| c.poll_completion())
        .map(|x| (x.wr_id, x.status))
        .collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got.iter().all(|(_, s)| *s != WcStatus::Success),
        "nothing completes as delivered: {got:?}"
    );
}

/// Reordered duplicate ACKs (Linux's `tcp_disordered_ack`): a pure ACK at RCV.NXT that
/// acknowledges SND.UNA, changes no window and carries a TSval less than an RTO older than
/// `ts_recent` is accepted, not dropped by PAWS (and not answered). One 10 s older is still a
/// PAWS drop. They used to be dropped, each answered with an ACK (2,870 in one relay run).
#[test]
fn a_reordered_duplicate_ack_passes_paws() {
    let (mut c, mut p) = connected();
    p.now += MS;
    let newer = p.now.as_micros() as u32;
    let ack = || p.seg(TcpFlags::ACK, Bth::new(Opcode::Acknowledge), &[]);
    p.send_at(&mut c, ack(), newer);
    p.send_at(&mut c, ack(), newer - 50);
    let s = c.stats();
    assert_eq!((s.paws_disordered_acks, s.paws_drops), (1, 0));
    assert!(c.poll_transmit(p.now).is_none(), "nothing to answer");
    p.send_at(&mut c, ack(), newer.wrapping_sub(10_000_000));
    assert_eq!(c.stats().paws_drops, 1, "a replay is still dropped");
}
