//! Fallback keeps timestamps (wire spec amendment 4), segment by segment: our SYN carries a
//! hello without timestamps (T=0, 16 bytes) beside the RFC 7323 timestamp option, so a peer
//! that ignores the hello (a kernel) still negotiates timestamps; a SYN-ACK with a hello makes
//! the connection BTH with folded timestamps (T=1) from then on, one without makes it plain,
//! with timestamps exactly when the SYN-ACK carries the option. The passive side takes both
//! forms of a BTH SYN (the old one, timestamps folded into the hello, and the new one) and a
//! kernel's plain SYN. The test plays the peer by hand and checks every option it gets back.

use super::super::handshake::SYN_OPTIONS_LEN;
use super::*;
use crate::wire::{Bth, TcpFlags, TcpOptions, Timestamps, MAX_OPTIONS_LEN};

const T0: Duration = Duration::from_millis(1);
const PEER_ISS: u32 = 0x2000_0000;
/// The hand-played peer's TSval at its SYN (or SYN-ACK); later segments count up from it.
const PEER_TSVAL: u32 = 0x7000_0000;

/// A segment the connection under test sent, parsed with its checksum checked.
struct Out {
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    options: TcpOptions,
    /// Bytes of the option area as sent (data offset × 4 − 20).
    options_len: usize,
    payload: Vec<u8>,
}

/// The next segment `c` sends at `now`.
fn next(c: &mut Connection, now: Duration) -> Out {
    let bytes = c.poll_transmit(now).expect("a segment");
    let r = TcpRepr::parse(&bytes, Some(c.config().ip)).expect("a valid segment");
    if let Some(b) = &r.options.bth {
        assert!(b.icrc_ok(r.payload), "ICRC");
    }
    Out {
        seq: r.seq,
        ack: r.ack,
        flags: r.flags,
        options: r.options.clone(),
        options_len: usize::from(bytes[12] >> 4) * 4 - 20,
        payload: r.payload.to_vec(),
    }
}

/// Hand `c` a segment from its peer (ports and addresses from `c`'s configuration).
fn deliver(
    c: &mut Connection,
    now: Duration,
    (seq, ack): (u32, u32),
    flags: TcpFlags,
    options: TcpOptions,
    payload: &[u8],
) {
    let cfg = c.config().clone();
    let mut options = options;
    if let Some(b) = &mut options.bth {
        b.seal(payload);
    }
    let repr = TcpRepr {
        src_port: cfg.remote_port,
        dst_port: cfg.local_port,
        seq,
        ack,
        flags,
        window: 65535,
        urgent: 0,
        options,
        payload,
    };
    c.handle_segment(now, &repr.to_vec(cfg.ip.reversed()).unwrap());
}

/// What a SYN or SYN-ACK of a kernel carries: MSS, window scale, SACK-permitted, and the
/// RFC 7323 option when `ts` is given.
fn kernel_options(ts: Option<Timestamps>) -> TcpOptions {
    TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: ts,
        ..Default::default()
    }
}

/// A hello from the peer: first MSN 100, messages up to 1 MiB, timestamps as given.
fn peer_hello(ts: Option<Timestamps>) -> Bth {
    Bth {
        msn: 100,
        mbo: 1 << 20,
        timestamps: ts,
        ..Bth::new(Opcode::Hello)
    }
}

/// A (client, BTH on, timestamps as `ts`) has sent its SYN: the connection and the SYN.
fn client(ts: bool) -> (Connection, Out) {
    let (mut a, _) = configs(true);
    a.timestamps = ts;
    let mut c = Connection::connect(a, T0);
    let syn = next(&mut c, T0);
    assert!(syn.flags.syn() && !syn.flags.ack());
    (c, syn)
}

#[test]
fn our_syn_carries_a_t0_hello_beside_the_timestamp_option() {
    let (mut c, syn) = client(true);
    let o = &syn.options;
    assert_eq!(
        (o.mss, o.window_scale, o.sack_permitted),
        (Some(1460), Some(7), true)
    );
    assert_eq!(
        o.timestamps,
        Some(Timestamps {
            tsval: c.tsval_at(T0),
            tsecr: 0
        }),
        "the RFC 7323 option: our clock, nothing to echo yet"
    );
    let hello = o.bth.expect("the hello");
    assert_eq!(hello.opcode, Opcode::Hello);
    assert_eq!(hello.timestamps, None, "T=0: the timestamps ride beside it");
    assert_eq!(hello.buffer_len(), 16);
    assert_eq!((hello.msn, hello.mbo), (0, crate::wire::MAX_MESSAGE_LEN));
    // 4 + 3 + 2 + 10 + 16 = 35 bytes, one of padding: within TCP's 40.
    assert_eq!(SYN_OPTIONS_LEN, 35);
    assert_eq!(syn.options_len, 36);
    assert!(syn.options_len <= MAX_OPTIONS_LEN);
    assert!(syn.payload.is_empty());
    // A retransmitted SYN repeats the form, with the clock of its own time.
    let rto = c.poll_timeout().expect("the SYN's RTO");
    c.handle_timeout(rto);
    let again = next(&mut c, rto);
    assert_eq!(again.seq, syn.seq);
    assert_eq!(again.options.bth.map(|b| b.timestamps), Some(None));
    assert_eq!(
        again.options.timestamps,
        Some(Timestamps {
            tsval: c.tsval_at(rto),
            tsecr: 0
        })
    );
    assert_eq!(again.options_len, 36);
}

/// Without `Config::timestamps` the SYN keeps the form before amendment 4: the hello folds
/// the timestamps (T=1, 24 bytes) and no RFC 7323 option rides beside it.
#[test]
fn without_timestamps_configured_the_hello_folds_them() {
    let (c, syn) = client(false);
    let hello = syn.options.bth.expect("the hello");
    assert_eq!(
        hello.timestamps,
        Some(Timestamps {
            tsval: c.tsval_at(T0),
            tsecr: 0
        })
    );
    assert_eq!(syn.options.timestamps, None);
    assert_eq!(syn.options_len, 36, "33 bytes, padded");
}

/// A kernel's SYN-ACK: no hello, the RFC 7323 option echoing our SYN's TSval. Plain TCP with
/// timestamps: the handshake's ACK and every later segment carry the option, echoing the
/// peer's newest TSval, RTT is measured from the echoes, and PAWS drops an old segment.
#[test]
fn a_syn_ack_without_hello_but_with_timestamps_is_plain_with_timestamps() {
    let (mut c, syn) = client(true);
    let our_ts = syn.options.timestamps.unwrap().tsval;
    let mut now = T0 + MS;
    deliver(
        &mut c,
        now,
        (PEER_ISS, syn.seq.wrapping_add(1)),
        TcpFlags::SYN | TcpFlags::ACK,
        kernel_options(Some(Timestamps {
            tsval: PEER_TSVAL,
            tsecr: our_ts,
        })),
        &[],
    );
    assert_eq!(c.mode(), Mode::Plain);
    assert_eq!(c.state(), State::Established);
    assert!(c.timestamps());
    let ack = next(&mut c, now);
    assert_eq!(
        (ack.seq, ack.ack, ack.flags),
        (syn.seq.wrapping_add(1), PEER_ISS + 1, TcpFlags::ACK)
    );
    assert_eq!(ack.options.bth, None, "no BTH after a fallback");
    assert_eq!(
        ack.options.timestamps,
        Some(Timestamps {
            tsval: c.tsval_at(now),
            tsecr: PEER_TSVAL
        })
    );
    // Our data carries them too, and the payload per segment leaves room for them.
    c.send_bytes(&pattern(1, 3000)).unwrap();
    let data = next(&mut c, now);
    assert_eq!(data.payload.len(), 1460 - 12);
    assert_eq!(data.options.timestamps.map(|t| t.tsecr), Some(PEER_TSVAL));
    // The peer's data, a later TSval: taken, and echoed.
    now += MS;
    let mut ts = Timestamps {
        tsval: PEER_TSVAL + 1000,
        tsecr: data.options.timestamps.unwrap().tsval,
    };
    deliver(
        &mut c,
        now,
        (
            PEER_ISS + 1,
            data.seq.wrapping_add(data.payload.len() as u32),
        ),
        TcpFlags::ACK | TcpFlags::PSH,
        kernel_options(Some(ts)),
        &[7; 100],
    );
    let mut got = Vec::new();
    drain(&mut c, &mut got);
    assert_eq!(got, vec![7; 100]);
    let mut echoed = None;
    while let Some(s) = c.poll_transmit(now) {
        let r = TcpRepr::parse(&s, Some(c.config().ip)).unwrap();
        assert!(r.options.bth.is_none());
        echoed = r.options.timestamps.map(|t| t.tsecr);
    }
    assert_eq!(echoed, Some(PEER_TSVAL + 1000));
    // PAWS: the next bytes with a TSval older than the one just taken are dropped.
    now += MS;
    ts.tsval = PEER_TSVAL + 500;
    let before = c.stats().paws_drops;
    deliver(
        &mut c,
        now,
        (
            PEER_ISS + 101,
            data.seq.wrapping_add(data.payload.len() as u32),
        ),
        TcpFlags::ACK | TcpFlags::PSH,
        kernel_options(Some(ts)),
        &[8; 100],
    );
    assert_eq!(c.stats().paws_drops, before + 1);
    drain(&mut c, &mut got);
    assert_eq!(got.len(), 100, "the old segment's bytes were not taken");
}

/// A SYN-ACK with neither the hello nor the RFC 7323 option: plain TCP without timestamps.
/// Our segments carry none, and a TSval the peer sends anyway is not checked (no PAWS).
#[test]
fn a_syn_ack_without_hello_or_timestamps_is_plain_without() {
    let (mut c, syn) = client(true);
    let now = T0 + MS;
    deliver(
        &mut c,
        now,
        (PEER_ISS, syn.seq.wrapping_add(1)),
        TcpFlags::SYN | TcpFlags::ACK,
        kernel_options(None),
        &[],
    );
    assert_eq!((c.mode(), c.state()), (Mode::Plain, State::Established));
    assert!(!c.timestamps());
    let ack = next(&mut c, now);
    assert_eq!((ack.options.bth, ack.options.timestamps), (None, None));
    assert_eq!(ack.options_len, 0);
    c.send_bytes(&pattern(2, 2000)).unwrap();
    let data = next(&mut c, now);
    assert_eq!(data.options.timestamps, None);
    assert_eq!(
        data.payload.len(),
        1460,
        "no option bytes to leave room for"
    );
    // Two segments whose (unnegotiated) TSvals go backwards: both taken.
    let their_ack = data.seq.wrapping_add(data.payload.len() as u32);
    for (i, tsval) in [(0u32, 5000u32), (1, 10)] {
        deliver(
            &mut c,
            now,
            (PEER_ISS + 1 + 10 * i, their_ack),
            TcpFlags::ACK | TcpFlags::PSH,
            kernel_options(Some(Timestamps { tsval, tsecr: 0 })),
            &[i as u8; 10],
        );
    }
    let mut got = Vec::new();
    drain(&mut c, &mut got);
    assert_eq!(got.len(), 20);
    assert_eq!(c.stats().paws_drops, 0);
}

/// A SYN-ACK with a hello (T=1, as the spec asks of a SYN-ACK): BTH mode as before, the
/// timestamps folded from then on, no RFC 7323 option on any later segment.
#[test]
fn a_syn_ack_with_hello_is_bth_with_folded_timestamps() {
    let (mut c, syn) = client(true);
    let now = T0 + MS;
    let our_ts = syn.options.timestamps.unwrap().tsval;
    let mut o = kernel_options(None);
    o.bth = Some(peer_hello(Some(Timestamps {
        tsval: PEER_TSVAL,
        tsecr: our_ts,
    })));
    deliver(
        &mut c,
        now,
        (PEER_ISS, syn.seq.wrapping_add(1)),
        TcpFlags::SYN | TcpFlags::ACK,
        o,
        &[],
    );
    assert_eq!(
        c.mode(),
        Mode::Bth {
            peer_first_msn: 100,
            peer_max_message: 1 << 20
        }
    );
    assert!(c.timestamps());
    let ack = next(&mut c, now);
    assert_eq!(ack.options.timestamps, None);
    let b = ack.options.bth.expect("BTH on the handshake's ACK");
    assert_eq!(
        b.timestamps,
        Some(Timestamps {
            tsval: c.tsval_at(now),
            tsecr: PEER_TSVAL
        })
    );
    assert!(c.srtt().is_some(), "the SYN's RTT sample");
}

/// The passive side, SYN in, SYN-ACK out: (the listener's connection, its SYN-ACK).
fn listener(bth: bool, syn: TcpOptions) -> (Connection, Out) {
    let (a, mut b) = configs(true);
    b.bth = bth;
    let repr = TcpRepr {
        src_port: A_PORT,
        dst_port: B_PORT,
        seq: PEER_ISS,
        ack: 0,
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: {
            let mut o = syn;
            if let Some(h) = &mut o.bth {
                h.seal(&[]);
            }
            o
        },
        payload: &[],
    };
    let mut c = Connection::accept(b, T0, &repr.to_vec(a.ip).unwrap()).expect("a valid SYN");
    let syn_ack = next(&mut c, T0);
    assert_eq!(syn_ack.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(syn_ack.ack, PEER_ISS + 1);
    (c, syn_ack)
}

/// The SYN-ACK of a BTH listener: a hello with the timestamps folded (T=1) echoing `tsecr`,
/// no RFC 7323 option beside it; then the peer's ACK (BTH, folded timestamps) establishes.
fn assert_bth_syn_ack(mut c: Connection, syn_ack: Out, tsecr: u32) {
    assert_eq!(
        c.mode(),
        Mode::Bth {
            peer_first_msn: 100,
            peer_max_message: 1 << 20
        }
    );
    assert_eq!(syn_ack.options.timestamps, None);
    let hello = syn_ack.options.bth.expect("a hello on the SYN-ACK");
    assert_eq!(hello.opcode, Opcode::Hello);
    assert_eq!(
        hello.timestamps,
        Some(Timestamps {
            tsval: c.tsval_at(T0),
            tsecr
        })
    );
    assert!(syn_ack.options_len <= MAX_OPTIONS_LEN);
    let ack = Bth {
        timestamps: Some(Timestamps {
            tsval: PEER_TSVAL + 10,
            tsecr: hello.timestamps.unwrap().tsval,
        }),
        ..Bth::new(Opcode::Acknowledge)
    };
    deliver(
        &mut c,
        T0 + MS,
        (PEER_ISS + 1, syn_ack.seq.wrapping_add(1)),
        TcpFlags::ACK,
        TcpOptions {
            bth: Some(ack),
            ..Default::default()
        },
        &[],
    );
    assert_eq!(c.state(), State::Established);
    assert!(c.timestamps());
}

/// The form before amendment 4: the SYN's hello folds the timestamps (T=1), no RFC 7323
/// option. Answered as always.
#[test]
fn listener_takes_an_old_style_hello_with_folded_timestamps() {
    let mut syn = kernel_options(None);
    syn.bth = Some(peer_hello(Some(Timestamps {
        tsval: PEER_TSVAL,
        tsecr: 0,
    })));
    let (c, syn_ack) = listener(true, syn);
    assert_bth_syn_ack(c, syn_ack, PEER_TSVAL);
}

/// Amendment 4's form: a T=0 hello beside the RFC 7323 option. The SYN-ACK's hello folds the
/// timestamps (T=1), echoing the TSval of the SYN's RFC 7323 option.
#[test]
fn listener_takes_a_t0_hello_beside_the_timestamp_option() {
    let mut syn = kernel_options(Some(Timestamps {
        tsval: PEER_TSVAL,
        tsecr: 0,
    }));
    syn.bth = Some(peer_hello(None));
    let (c, syn_ack) = listener(true, syn);
    assert_bth_syn_ack(c, syn_ack, PEER_TSVAL);
}

/// A kernel's SYN (no hello, the RFC 7323 option) and, to a listener without BTH, a SYN of
/// ours in amendment 4's form: both plain TCP with timestamps; the SYN-ACK carries the option
/// echoing the SYN's TSval, and no hello.
#[test]
fn listener_answers_a_plain_syn_with_timestamps() {
    let ts = Some(Timestamps {
        tsval: PEER_TSVAL,
        tsecr: 0,
    });
    let mut ours = kernel_options(ts);
    ours.bth = Some(peer_hello(None));
    for (bth, syn) in [(true, kernel_options(ts)), (false, ours)] {
        let (c, syn_ack) = listener(bth, syn);
        assert_eq!(c.mode(), Mode::Plain, "listener bth {bth}");
        assert!(c.timestamps());
        assert_eq!(syn_ack.options.bth, None);
        assert_eq!(
            syn_ack.options.timestamps,
            Some(Timestamps {
                tsval: c.tsval_at(T0),
                tsecr: PEER_TSVAL
            })
        );
    }
    // A plain SYN without the option: no timestamps.
    let (c, syn_ack) = listener(true, kernel_options(None));
    assert_eq!(c.mode(), Mode::Plain);
    assert!(!c.timestamps());
    assert_eq!(syn_ack.options.timestamps, None);
}

/// Two of our connections back to back: A's SYN in amendment 4's form, B's SYN-ACK with the
/// folded timestamps, then BTH both ways with timestamps on every segment.
#[test]
fn two_of_ours_still_speak_bth() {
    let mut d = established(true);
    assert!(matches!(d.a.mode(), Mode::Bth { .. }));
    assert!(matches!(d.b.mode(), Mode::Bth { .. }));
    assert!(d.a.timestamps() && d.b.timestamps());
    assert!(d.a.srtt().is_some() && d.b.srtt().is_some());
    d.b.post_recv(1, vec![0; 5000]).unwrap();
    d.a.post_send(WorkRequest::send(1, pattern(3, 5000), None))
        .unwrap();
    let mut plain_ts = 0;
    let ok = d.run(
        Duration::from_secs(1),
        |_, _, p: Vec<u8>| {
            let r = TcpRepr::parse(&p, None).unwrap();
            let folded = r.options.bth.is_some_and(|b| b.timestamps.is_some());
            plain_ts += usize::from(r.options.timestamps.is_some());
            assert!(folded || r.options.timestamps.is_some(), "{r:?}");
            Some(p)
        },
        |d| d.b.poll_completion().is_some(),
    );
    assert!(ok);
    // Amendment 1's plain-form ACKs aside (none without loss), every segment folds them.
    assert_eq!(plain_ts, 0);
}
