//! `bth nc`'s pump between two of our connections back to back (virtual time, no root): both
//! modes carry bytes exactly both ways, through a slow output too, and close in order; the
//! mode lines say what was negotiated; the command line is checked before anything is set up.

use super::pump::{mode_line, Input, Offer, Pump, PumpError, Refused, Side, Sink, Source};
use super::{NcArgs, NcError, Target};
use clap::Parser;
use std::collections::VecDeque;
use std::time::Duration;
use tcp_bth::pair::BackToBack;
use tcp_bth::{Config, ConnectionError, Framing, Mode};

/// Input in chunks, then EOF.
struct Chunks(VecDeque<Vec<u8>>);

impl Chunks {
    /// `data` in chunks of the sizes in `sizes`, taken in turn.
    fn of(data: &[u8], sizes: &[usize]) -> Chunks {
        let mut q = VecDeque::new();
        let (mut at, mut i) = (0, 0);
        while at < data.len() {
            let n = sizes[i % sizes.len()].min(data.len() - at);
            q.push_back(data[at..at + n].to_vec());
            at += n;
            i += 1;
        }
        Chunks(q)
    }
}

impl Source for Chunks {
    fn poll(&mut self) -> Input {
        match self.0.pop_front() {
            Some(c) => Input::Data(c),
            None => Input::Eof,
        }
    }
}

/// Output into memory; with `every` > 1, full except at every `every`-th offer (a slow
/// stdout).
#[derive(Default)]
struct Collect {
    got: Vec<u8>,
    offers: u64,
    every: u64,
}

impl Sink for Collect {
    fn offer(&mut self, bytes: Vec<u8>) -> Result<(), Refused> {
        self.offers += 1;
        if self.every > 1 && !self.offers.is_multiple_of(self.every) {
            return Err(Refused::Full(bytes));
        }
        self.got.extend_from_slice(&bytes);
        Ok(())
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// Configs of a client (`a`) and a listener (`b`) as `bth nc` makes them.
fn configs(seed: u64, a_bth: bool, b_bth: bool) -> (Config, Config) {
    let (mut a, mut b) = bth_io::sim::pair_configs(seed);
    for (c, bth) in [(&mut a, a_bth), (&mut b, b_bth)] {
        c.bth = bth;
        c.max_message_len = super::pump::MSG_MAX as u32;
        c.rnr_timeout = None;
    }
    (a, b)
}

/// Pump `to_b` from A to B and `to_a` back, through `sinks`, until both pumps are done; the
/// pair and what each side's output got.
fn exchange(
    a_cfg: Config,
    b_cfg: Config,
    to_b: &[u8],
    to_a: &[u8],
    sinks: (Collect, Collect),
) -> (BackToBack, Vec<u8>, Vec<u8>) {
    let mut w = BackToBack::established(a_cfg, b_cfg, Duration::from_millis(1));
    let mut pa = Pump::new(Chunks::of(to_b, &[65536, 1, 1000, 70000]), sinks.0);
    let mut pb = Pump::new(Chunks::of(to_a, &[4096, 65536, 3]), sinks.1);
    let (mut a_done, mut b_done) = (false, false);
    let end = w.now + Duration::from_secs(120);
    while !(a_done && b_done) {
        assert!(w.now < end, "not done: {:?} {:?}", w.a, w.b);
        if !a_done {
            a_done = pa.step(&mut w.a).expect("A's pump");
        }
        if !b_done {
            b_done = pb.step(&mut w.b).expect("B's pump");
        }
        if !w.step(&mut |_, _, p| Some(p)) {
            // Nothing on the wire and no timer: the pumps' turn comes again a little later.
            w.now += Duration::from_micros(100);
        }
    }
    assert_eq!(pa.moved().sent, to_b.len() as u64);
    assert_eq!(pb.moved().received, to_b.len() as u64);
    // tcp_bth carries messages; a byte stream none.
    let messages = (pa.moved().messages_sent, pb.moved().messages_received);
    match w.a.mode() {
        Mode::Bth { .. } => assert!(messages.0 > 0 && messages.0 == messages.1, "{messages:?}"),
        _ => assert_eq!(messages, (0, 0)),
    }
    (w, pa.into_sink().got, pb.into_sink().got)
}

#[test]
fn two_of_ours_carry_stdin_as_messages_both_ways_exactly() {
    let (a, b) = configs(1, true, true);
    let (to_b, to_a) = (pattern(1, 3 << 20), pattern(2, (1 << 20) + 17));
    let (w, got_a, got_b) = exchange(a, b, &to_b, &to_a, Default::default());
    assert!(matches!(w.a.mode(), Mode::Bth { .. }));
    assert!(
        got_b == to_b,
        "A to B differs ({} of {})",
        got_b.len(),
        to_b.len()
    );
    assert!(
        got_a == to_a,
        "B to A differs ({} of {})",
        got_a.len(),
        to_a.len()
    );
    let offer = Offer {
        plain: false,
        framing: Framing::PerSegment,
    };
    assert_eq!(
        mode_line(&w.a, Side::Client, offer).as_deref(),
        Some("tcp_bth, per-segment framing")
    );
    assert_eq!(
        mode_line(&w.b, Side::Server, offer).as_deref(),
        Some("tcp_bth, per-segment framing")
    );
}

#[test]
fn a_slow_output_holds_the_sender_back_and_loses_nothing() {
    for bth in [true, false] {
        let (a, b) = configs(2, bth, bth);
        let (to_b, to_a) = (pattern(3, 2 << 20), pattern(4, 5000));
        let slow = Collect {
            every: 7,
            ..Collect::default()
        };
        let (_, got_a, got_b) = exchange(a, b, &to_b, &to_a, (Collect::default(), slow));
        assert!(got_b == to_b, "bth {bth}: A to B differs");
        assert!(got_a == to_a, "bth {bth}: B to A differs");
    }
}

#[test]
fn a_peer_without_the_option_gets_a_byte_stream_and_the_lines_say_why() {
    // B stands for a kernel peer: it does not take the option.
    let (a, b) = configs(3, true, false);
    let (to_b, to_a) = (pattern(5, (2 << 20) + 3), pattern(6, 1 << 20));
    let (w, got_a, got_b) = exchange(a, b, &to_b, &to_a, Default::default());
    assert_eq!(w.a.mode(), Mode::Plain);
    assert!(got_b == to_b && got_a == to_a, "bytes differ");
    let offered = Offer {
        plain: false,
        framing: Framing::PerSegment,
    };
    let plain = Offer {
        plain: true,
        ..offered
    };
    assert_eq!(
        mode_line(&w.a, Side::Client, offered).as_deref(),
        Some("plain TCP (the peer did not answer the tcp_bth option), timestamps on")
    );
    assert_eq!(
        mode_line(&w.b, Side::Server, plain).as_deref(),
        Some("plain TCP (--plain: the peer offered tcp_bth, not taken), timestamps on")
    );
}

#[test]
fn seq_framing_is_said_when_both_ask_and_when_the_peer_does_not() {
    let (mut a, mut b) = configs(4, true, true);
    a.framing = Framing::Seq;
    b.framing = Framing::Seq;
    let w = BackToBack::established(a.clone(), b, Duration::from_millis(1));
    let seq = Offer {
        plain: false,
        framing: Framing::Seq,
    };
    let line = mode_line(&w.a, Side::Client, seq).unwrap();
    assert!(line.starts_with("tcp_bth, seq framing"), "{line}");
    let (_, b) = configs(4, true, true);
    let w = BackToBack::established(a, b, Duration::from_millis(1));
    assert_eq!(
        mode_line(&w.a, Side::Client, seq).as_deref(),
        Some("tcp_bth, per-segment framing (the peer did not ask for seq framing)")
    );
}

#[test]
fn a_reset_ends_the_pump_with_the_connections_error() {
    let (a, b) = configs(5, true, false);
    let mut w = BackToBack::established(a, b, Duration::from_millis(1));
    // The peer's input never ends, so A's pump would wait for its FIN; the peer resets.
    let mut pa = Pump::new(Chunks(VecDeque::new()), Collect::default());
    assert!(!pa.step(&mut w.a).unwrap());
    w.b.abort();
    w.settle(Duration::from_secs(1));
    let e = loop {
        match pa.step(&mut w.a) {
            Err(e) => break e,
            Ok(done) => assert!(!done, "done after a reset"),
        }
        assert!(w.step(&mut |_, _, p| Some(p)), "no error came");
    };
    assert_eq!(e, PumpError::Connection(ConnectionError::Reset));
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    nc: NcArgs,
}

fn args(a: &[&str]) -> Result<NcArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("nc").chain(a.iter().copied())).map(|c| c.nc)
}

#[test]
fn the_command_line_says_what_it_takes() {
    let t = |a: &[&str]| args(a).unwrap().target();
    assert_eq!(
        t(&["10.99.3.1", "8080"]).unwrap(),
        Target::Connect("10.99.3.1:8080".parse().unwrap())
    );
    assert_eq!(
        t(&["[fd00::1]", "80"]).unwrap(),
        Target::Connect("[fd00::1]:80".parse().unwrap())
    );
    assert_eq!(t(&["-l", "9000"]).unwrap(), Target::Listen(9000));
    let e = t(&["localhost", "80"]).unwrap_err();
    assert!(
        matches!(&e, NcError::Usage(m) if m.contains("resolves no names")),
        "{e}"
    );
    let e = t(&["-l", "10.99.3.2", "80"]).unwrap_err();
    assert!(e.to_string().contains("with -l give only PORT"), "{e}");
    let e = t(&["10.99.3.1"]).unwrap_err();
    assert!(e.to_string().contains("HOST PORT"), "{e}");
    assert!(t(&["10.99.3.1", "0"]).is_err());
    assert!(args(&["-l", "-p", "5", "80"]).is_err(), "-p is a client's");
    let a = args(&["--plain", "--framing", "seq", "10.99.3.1", "1"]).unwrap();
    let c = a.config();
    assert!(!c.bth);
    assert_eq!(
        (c.framing, c.mss, c.rnr_timeout),
        (Framing::Seq, 1460, None)
    );
    assert_eq!(a.tun().unwrap().to_string(), super::DEFAULT_TUN);
}
