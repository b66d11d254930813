//! `--plain`: the same run over a plain TCP byte stream (no tcp_bth). The options are checked
//! the same way, with the control messages as length-prefixed frames ([`Ctrl::frame`]): the
//! client's hello, the server's accept or refusal; then the client writes its messages
//! back to back and the server reads (and with `verify` checks) them until the client's FIN,
//! and sends its statistics before its own FIN. The client sends none: its bytes are the data
//! stream, which has no room for a frame after the data without a length the server would
//! have to know in advance (`--duration`).

use super::check::{refusal, Options};
use super::counters::ConnCounters;
use super::ctrl::{Ctrl, Hello, Regions};
use super::side::Side;
use super::{payload, PerfError};
use std::time::Duration;
use tcp_bth::{Connection, State};

/// Read everything the stream has into `inbox`.
pub(crate) fn read_all(c: &mut Connection, inbox: &mut Vec<u8>) {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = c.recv_bytes(&mut buf);
        if n == 0 {
            break;
        }
        inbox.extend_from_slice(&buf[..n]);
    }
}

/// Write `m` as a frame on the byte stream.
pub(crate) fn send_frame(c: &mut Connection, m: &Ctrl) -> Result<(), PerfError> {
    c.send_bytes(&m.frame())
        .map(|_| ())
        .map_err(PerfError::Post)
}

/// The hello a client sends on the byte stream: its options and its QP, no regions (a plain
/// run has none). Also what a tcp_bth client sends when the handshake left it on a byte
/// stream (`mismatch`), so that the server's option check can refuse it.
pub(crate) fn plain_hello(side: &Side, qp: u32) -> Ctrl {
    Ctrl::Hello(Hello {
        options: Options::of(&side.cfg),
        qp,
        regions: Regions::default(),
    })
}

#[derive(Default)]
pub(crate) struct PlainClient {
    hello_sent: bool,
    accepted: bool,
    inbox: Vec<u8>,
    next: u64,
    total: Option<u64>,
    /// Bytes handed to the stack so far, and of those acknowledged by the last turn.
    queued: u64,
    acked: u64,
    /// When the acknowledged bytes last grew.
    acked_at: Duration,
}

impl PlainClient {
    pub fn progress(&self, side: &Side) -> (u64, Option<u64>) {
        let total = self
            .total
            .or(side.cfg.duration.is_none().then_some(side.cfg.count));
        (self.next, total)
    }

    pub fn turn(
        &mut self,
        side: &mut Side,
        c: &mut Connection,
        now: Duration,
        qp: u32,
    ) -> Result<(), PerfError> {
        if !self.hello_sent {
            side.cfg.validate()?;
            let frame = plain_hello(side, qp).frame();
            c.send_bytes(&frame).map_err(PerfError::Post)?;
            // The hello is not data: leave it out of the bytes acknowledged.
            self.queued = frame.len() as u64;
            self.acked = self.queued;
            self.hello_sent = true;
        }
        read_all(c, &mut self.inbox);
        while let Some(m) = Ctrl::unframe(&mut self.inbox) {
            match m? {
                Ctrl::Accept(_) if !self.accepted && !side.closed => {
                    self.accepted = true;
                    side.settled = true;
                    side.start(now);
                }
                Ctrl::Refuse(reason) => {
                    side.refusal(PerfError::Refused { reason });
                    side.refused_at = Some(now);
                }
                Ctrl::Stats(s) => side.report.peer = Some(*s),
                other => side.unexpected(&other),
            }
        }
        if side.refused_at.is_some() {
            if !side.closed {
                side.close_after_refusal(c, now);
            }
            return Ok(());
        }
        if self.accepted && !side.closed {
            self.stream(side, c, now);
        }
        if !side.closed && c.state() == State::CloseWait {
            side.report.errors.push(PerfError::PeerClosedEarly);
            side.close(c, false);
        }
        Ok(())
    }

    /// Keep the send queue topped up with whole messages until the run has all of them,
    /// close once everything is acknowledged.
    fn stream(&mut self, side: &mut Side, c: &mut Connection, now: Duration) {
        let cfg = &side.cfg;
        let size = u64::from(cfg.size);
        let started = side.started.unwrap_or(now);
        let over = |next: u64| match cfg.duration {
            Some(d) => now.saturating_sub(started) >= d,
            None => next >= cfg.count,
        };
        while self.total.is_none() && c.send_backlog() < size * cfg.tx_depth as u64 {
            if over(self.next) {
                self.total = Some(self.next);
                break;
            }
            if c.send_bytes(&payload(cfg, self.next)).is_err() {
                break;
            }
            // Handed to the stack, as `post_send` is in BTH mode: latencies compare alike.
            if cfg.trace {
                side.report.posted.push(now);
            }
            self.queued += size;
            self.next += 1;
        }
        if self.total.is_none() && over(self.next) {
            self.total = Some(self.next);
        }
        let acked = self.queued - c.send_backlog().min(self.queued);
        if acked > self.acked {
            let since = std::mem::replace(&mut self.acked_at, now);
            side.report
                .timeline
                .record_span(since, now, acked - self.acked);
            self.acked = acked;
        }
        if let (Some(total), 0) = (self.total, c.send_backlog()) {
            side.report.messages = total;
            side.report.bytes = total * size;
            side.mark_data(now);
            side.close(c, false);
        }
    }
}

#[derive(Default)]
pub(crate) struct PlainServer {
    validated: bool,
    hello: bool,
    inbox: Vec<u8>,
    /// The part of a message not yet complete (`verify`).
    stream: Vec<u8>,
    /// When bytes last arrived.
    last: Duration,
}

impl PlainServer {
    pub fn turn(
        &mut self,
        side: &mut Side,
        c: &mut Connection,
        now: Duration,
    ) -> Result<(), PerfError> {
        if !self.validated {
            side.cfg.validate()?;
            self.validated = true;
        }
        let mut fresh = Vec::new();
        read_all(c, &mut fresh);
        if self.hello {
            self.data(side, &fresh, now);
        } else {
            self.inbox.extend_from_slice(&fresh);
            match Ctrl::unframe(&mut self.inbox).transpose()? {
                None => {}
                Some(Ctrl::Hello(h)) => {
                    self.hello = true;
                    side.settled = true;
                    if let Some(reason) = refusal(&h.options, &Options::of(&side.cfg)) {
                        send_frame(c, &Ctrl::Refuse(reason.clone()))?;
                        side.refusal(PerfError::OptionsDiffer { reason });
                        side.close(c, false);
                        return Ok(());
                    }
                    send_frame(c, &Ctrl::Accept(Regions::default()))?;
                    side.start(now);
                    // Whatever followed the hello is data.
                    let rest = std::mem::take(&mut self.inbox);
                    self.data(side, &rest, now);
                }
                Some(other) => {
                    return Err(PerfError::UnexpectedControl { what: other.what() });
                }
            }
        }
        if c.state() == State::CloseWait && !side.closed {
            if !self.hello {
                // Unless another connection of the run was refused: this one's client gave
                // up too.
                if !side.run.is_set() {
                    side.report.errors.push(PerfError::PeerClosedEarly);
                }
            } else {
                side.report.counters = ConnCounters::of(c);
                send_frame(c, &Ctrl::Stats(Box::new(side.report.summary())))?;
            }
            side.close(c, false);
        }
        Ok(())
    }

    fn data(&mut self, side: &mut Side, bytes: &[u8], now: Duration) {
        if bytes.is_empty() || side.closed {
            return;
        }
        let size = side.cfg.size as usize;
        let r = &mut side.report;
        let before = r.bytes;
        r.bytes += bytes.len() as u64;
        let since = std::mem::replace(&mut self.last, now);
        r.timeline.record_span(since, now, bytes.len() as u64);
        // Message i has arrived once its last byte has been read.
        let whole = r.bytes / size as u64;
        if side.cfg.trace {
            for i in before / size as u64..whole {
                r.arrived.push((i, now));
            }
        }
        side.mark_data(now);
        if !side.cfg.mode.verify {
            side.report.messages = whole;
            return;
        }
        self.stream.extend_from_slice(bytes);
        while self.stream.len() >= size {
            let i = side.report.messages;
            if self.stream[..size] == payload(&side.cfg, i)[..] {
                side.report.verified += 1;
            } else {
                side.report
                    .errors
                    .push(PerfError::MessageDiffers { msg: i });
            }
            self.stream.drain(..size);
            side.report.messages += 1;
        }
    }
}
