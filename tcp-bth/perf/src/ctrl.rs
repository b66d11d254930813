//! Control messages between the two perf apps: SENDs without immediate in BTH mode (data
//! messages always carry one), length-prefixed frames in the byte stream of `--plain`.
//!
//! * hello (client → server, first): the client's options ([`Options`]), which connection of
//!   the run this is, and the client's regions (for a server that sends too, `-b`);
//! * accept (server → client): the server's regions; or refuse: why, in words;
//! * done (each requester → its responder, behind its last message): how many it sent;
//! * statistics (each side → the other, just before its FIN): its connection's counters.
//!
//! Every message starts with [`MAGIC`], a version byte and a tag, so a peer that is not a
//! `bth-perf` of this protocol is told apart from a malformed message.

use super::check::Options;
use super::counters::PeerSummary;
use super::{PerfOp, RunMode};
use std::time::Duration;
use thiserror::Error;

/// First four bytes of every control message.
pub const MAGIC: [u8; 4] = *b"BTHP";
/// Protocol version, the byte after [`MAGIC`]; a message with another is refused
/// ([`CtrlError::Version`]).
pub const VERSION: u8 = 1;
/// Largest control message: receive buffers are at least this long, refusals are cut to fit.
pub const CTRL_MAX: usize = 1024;
const HEAD: usize = MAGIC.len() + 2;

/// The remote access a responder gives its requester: the WRITE target and the READ source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Regions {
    /// rkey of the WRITE target MR (0 where none is registered: a hello without `-b`,
    /// `--plain`).
    pub write_rkey: u32,
    /// Address of the WRITE target's first byte: WRITE `i` goes to this plus its offset.
    pub write_addr: u64,
    /// rkey of the READ source MR (0 where none is registered, as for `write_rkey`).
    pub read_rkey: u32,
    /// Address of the READ source's first byte: READ `i` reads its slot,
    /// `(i % tx_depth) * size` bytes on.
    pub read_addr: u64,
}

/// The client's first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// What the client runs; the server refuses the run unless its own are equal.
    pub options: Options,
    /// Which of the run's `options.qps` connections this is (from 0).
    pub qp: u32,
    /// The client's regions (zero unless `options.mode.bidir`).
    pub regions: Regions,
}

/// One control message (see the module docs for who sends which, when).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ctrl {
    /// Client → server, first: the client's options, connection and regions.
    Hello(Hello),
    /// Server → client: the options agree; the server's regions.
    Accept(Regions),
    /// Server → client: the options differ, in words; cut to fit [`CTRL_MAX`].
    Refuse(String),
    /// Requester → responder, behind its last message: how many messages it posted.
    Done(u64),
    /// Boxed: the counters are far larger than every other message.
    Stats(Box<PeerSummary>),
}

/// Why a control message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CtrlError {
    /// The message ends before its fields do.
    #[error("control message of {len} bytes is too short for its {what}")]
    Short {
        /// The part being read: `header`, `hello`, `accept`, `done` or `statistics`.
        what: &'static str,
        /// The whole message's length, in bytes.
        len: usize,
    },
    /// The message does not start with [`MAGIC`]: the peer is no `bth-perf`.
    #[error("the peer does not speak bth-perf's protocol (no BTHP magic)")]
    Magic,
    /// The message is of another protocol [`VERSION`].
    #[error("the peer speaks bth-perf protocol version {got}, this one {VERSION}")]
    Version {
        /// The peer's version byte.
        got: u8,
    },
    /// A tag byte (the one after the version) that names no message.
    #[error("unknown control message tag {0:#04x}")]
    Tag(u8),
    /// A hello whose operation code names no [`PerfOp`].
    #[error("unknown operation code {0} in the hello")]
    Op(u8),
    /// Longer than [`CTRL_MAX`].
    #[error("control message of {len} bytes, at most {CTRL_MAX}")]
    TooLong {
        /// Its length in bytes (of a frame: the length its prefix announces).
        len: usize,
    },
}

impl Ctrl {
    /// Its name, for messages about it.
    pub fn what(&self) -> &'static str {
        match self {
            Ctrl::Hello(_) => "hello",
            Ctrl::Accept(_) => "accept",
            Ctrl::Refuse(_) => "refusal",
            Ctrl::Done(_) => "done",
            Ctrl::Stats(_) => "statistics",
        }
    }

    /// The message as a SEND's payload: [`MAGIC`], [`VERSION`], a tag byte, then the fields,
    /// big-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.push(VERSION);
        match self {
            Ctrl::Hello(h) => {
                v.push(b'H');
                let o = &h.options;
                v.push(o.op.code());
                v.push(o.mode.to_bits());
                v.extend_from_slice(&o.qps.to_be_bytes());
                v.extend_from_slice(&h.qp.to_be_bytes());
                v.extend_from_slice(&o.size.to_be_bytes());
                v.extend_from_slice(&o.count.to_be_bytes());
                let ms = o.duration.map_or(0, |d| d.as_millis() as u64);
                v.extend_from_slice(&ms.to_be_bytes());
                v.extend_from_slice(&o.tx_depth.to_be_bytes());
                v.extend_from_slice(&o.rx_depth.to_be_bytes());
                put_regions(&mut v, &h.regions);
            }
            Ctrl::Accept(r) => {
                v.push(b'A');
                put_regions(&mut v, r);
            }
            Ctrl::Refuse(reason) => {
                v.push(b'R');
                // Cut at a character boundary so the message fits a receive buffer.
                let mut end = reason.len().min(CTRL_MAX - HEAD);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                v.extend_from_slice(&reason.as_bytes()[..end]);
            }
            Ctrl::Done(n) => {
                v.push(b'D');
                v.extend_from_slice(&n.to_be_bytes());
            }
            Ctrl::Stats(s) => {
                v.push(b'S');
                // Two counted lists, so either can grow without breaking an older reader.
                let (head, counters) = s.to_words();
                for words in [head, counters] {
                    v.push(words.len() as u8);
                    for w in words {
                        v.extend_from_slice(&w.to_be_bytes());
                    }
                }
            }
        }
        v
    }

    /// Read a message [`Ctrl::encode`] made (a SEND's payload, or a frame's body). Bytes after
    /// the fields are ignored; a refusal's text is everything after the tag.
    pub fn decode(b: &[u8]) -> Result<Ctrl, CtrlError> {
        if b.len() > CTRL_MAX {
            return Err(CtrlError::TooLong { len: b.len() });
        }
        if b.len() < MAGIC.len() || b[..MAGIC.len()] != MAGIC {
            return Err(CtrlError::Magic);
        }
        let mut r = Reader {
            b,
            at: MAGIC.len(),
            what: "header",
        };
        let version = r.u8()?;
        if version != VERSION {
            return Err(CtrlError::Version { got: version });
        }
        let tag = r.u8()?;
        match tag {
            b'H' => {
                r.what = "hello";
                let code = r.u8()?;
                let op = PerfOp::from_code(code).ok_or(CtrlError::Op(code))?;
                let flags = r.u8()?;
                let qps = r.u32()?;
                let qp = r.u32()?;
                let size = r.u32()?;
                let count = r.u64()?;
                let ms = r.u64()?;
                let tx_depth = r.u32()?;
                let rx_depth = r.u32()?;
                let regions = r.regions()?;
                let duration = (ms > 0).then(|| Duration::from_millis(ms));
                let options = Options {
                    op,
                    size,
                    count,
                    duration,
                    tx_depth,
                    rx_depth,
                    qps,
                    mode: RunMode::from_bits(flags),
                };
                Ok(Ctrl::Hello(Hello {
                    options,
                    qp,
                    regions,
                }))
            }
            b'A' => {
                r.what = "accept";
                Ok(Ctrl::Accept(r.regions()?))
            }
            b'R' => Ok(Ctrl::Refuse(
                String::from_utf8_lossy(&b[r.at..]).into_owned(),
            )),
            b'D' => {
                r.what = "done";
                Ok(Ctrl::Done(r.u64()?))
            }
            b'S' => {
                r.what = "statistics";
                let head = r.words()?;
                let counters = r.words()?;
                Ok(Ctrl::Stats(Box::new(PeerSummary::from_words(
                    &head, &counters,
                ))))
            }
            t => Err(CtrlError::Tag(t)),
        }
    }

    /// The message as a byte-stream frame (`--plain`): a 4-byte big-endian length first.
    pub fn frame(&self) -> Vec<u8> {
        let body = self.encode();
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(&body);
        v
    }

    /// Take one whole frame off the front of `buf`: `None` until all of it has arrived.
    pub fn unframe(buf: &mut Vec<u8>) -> Option<Result<Ctrl, CtrlError>> {
        let len = u32::from_be_bytes(buf.get(..4)?.try_into().ok()?) as usize;
        if len > CTRL_MAX {
            return Some(Err(CtrlError::TooLong { len }));
        }
        let body = buf.get(4..4 + len)?;
        let ctrl = Ctrl::decode(body);
        buf.drain(..4 + len);
        Some(ctrl)
    }
}

fn put_regions(v: &mut Vec<u8>, r: &Regions) {
    v.extend_from_slice(&r.write_rkey.to_be_bytes());
    v.extend_from_slice(&r.write_addr.to_be_bytes());
    v.extend_from_slice(&r.read_rkey.to_be_bytes());
    v.extend_from_slice(&r.read_addr.to_be_bytes());
}

/// Big-endian fields in order; a short message is an error naming the message.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    what: &'static str,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], CtrlError> {
        let short = CtrlError::Short {
            what: self.what,
            len: self.b.len(),
        };
        let s = self.b.get(self.at..self.at + N).ok_or(short.clone())?;
        self.at += N;
        s.try_into().map_err(|_| short)
    }
    fn u8(&mut self) -> Result<u8, CtrlError> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, CtrlError> {
        self.take().map(u32::from_be_bytes)
    }
    fn u64(&mut self) -> Result<u64, CtrlError> {
        self.take().map(u64::from_be_bytes)
    }
    /// A count byte, then that many u64.
    fn words(&mut self) -> Result<Vec<u64>, CtrlError> {
        let n = self.u8()?;
        (0..n).map(|_| self.u64()).collect()
    }
    fn regions(&mut self) -> Result<Regions, CtrlError> {
        Ok(Regions {
            write_rkey: self.u32()?,
            write_addr: self.u64()?,
            read_rkey: self.u32()?,
            read_addr: self.u64()?,
        })
    }
}
