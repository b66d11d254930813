//! The plain receive path: a TCP byte stream. In-order bytes wait in a queue for `recv_bytes`;
//! bytes beyond a hole wait in an out-of-order store until it fills. Which ranges have arrived
//! is `RecvState`'s record, as in BTH mode; this path only holds the bytes.

use super::*;
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug, Default)]
pub(super) struct PlainRx {
    queue: VecDeque<u8>,
    /// Stream offset one past the last byte ever appended to `queue`.
    queued_to: u64,
    ooo: BTreeMap<u64, Vec<u8>>,
    ooo_bytes: usize,
}

impl PlainRx {
    pub fn held(&self) -> RxHeld {
        RxHeld {
            stream_queue: self.queue.len() as u64,
            ooo_store: self.ooo_bytes as u64,
        }
    }

    /// Move stored chunks that the cumulative point has passed into the queue; returns the
    /// bytes appended.
    fn pull(&mut self, nxt: u64) -> u64 {
        let mut added = 0;
        while let Some((&s, _)) = self.ooo.first_key_value() {
            if s >= nxt {
                break;
            }
            let chunk = self.ooo.remove(&s).expect("present");
            self.ooo_bytes -= chunk.len();
            let end = s + chunk.len() as u64;
            if end > self.queued_to {
                let skip = (self.queued_to - s) as usize;
                self.queue.extend(&chunk[skip..]);
                added += end - self.queued_to;
                self.queued_to = end;
            }
        }
        added
    }
}

impl Connection {
    pub(super) fn on_plain_data(&mut self, seg_off: i64, payload: &[u8]) {
        // Trim to [rcv_nxt, rcv_nxt + window): a byte stream can be cut anywhere.
        let wnd = self.rcv_window();
        let RxPath::Plain(p) = &mut self.rx else {
            return;
        };
        let nxt = self.rcv.nxt;
        let start = seg_off.max(nxt as i64);
        let end = (seg_off + payload.len() as i64).min((nxt + wnd) as i64);
        if end <= start {
            return;
        }
        let data = &payload[(start - seg_off) as usize..(end - seg_off) as usize];
        let (start, end) = (start as u64, end as u64);
        if start == nxt {
            p.queue.extend(data);
            p.queued_to = end;
            self.stats.bytes_received += data.len() as u64;
        } else {
            if self.rcv.ooo.contains(start, end) {
                return;
            }
            if self.rcv.table_full(start, end, self.cfg.max_ooo_ranges) {
                self.stats.ooo_table_full += 1;
                return;
            }
            p.ooo_bytes += data.len();
            if let Some(old) = p.ooo.insert(start, data.to_vec()) {
                p.ooo_bytes -= old.len();
            }
        }
        self.rcv.mark(start, end);
        self.stats.bytes_received += p.pull(self.rcv.nxt);
    }

    /// Queue bytes to send; returns how many were taken.
    pub fn send_bytes(&mut self, data: &[u8]) -> Result<usize, CallError> {
        if self.mode != Mode::Plain {
            return Err(if self.mode == Mode::Pending {
                CallError::NotEstablished
            } else {
                CallError::NotPlain
            });
        }
        self.require_open()?;
        let mut taken = 0;
        for chunk in data.chunks(MAX_CHUNK) {
            self.snd.framer.post(bth_framer::WorkRequest {
                wr_id: 0,
                op: bth_framer::WrOp::Send { imm: None },
                sg_list: vec![bytes::Bytes::copy_from_slice(chunk)],
            })?;
            taken += chunk.len();
        }
        Ok(taken)
    }

    /// Read in-order received bytes.
    pub fn recv_bytes(&mut self, out: &mut [u8]) -> usize {
        let RxPath::Plain(p) = &mut self.rx else {
            return 0;
        };
        let n = out.len().min(p.queue.len());
        for (o, b) in out.iter_mut().zip(p.queue.drain(..n)) {
            *o = b;
        }
        if n > 0 {
            // Reading opened the window: tell the peer (RFC 9293 window update).
            self.owed.ack = true;
        }
        n
    }

    /// Plain mode: in-order bytes waiting for [`recv_bytes`](Self::recv_bytes) (0 in BTH
    /// mode).
    pub fn readable_bytes(&self) -> usize {
        match &self.rx {
            RxPath::Plain(p) => p.queue.len(),
            RxPath::Bth(_) => 0,
        }
    }

    /// The peer sent FIN and every byte before it has been read.
    pub fn peer_finished(&self) -> bool {
        self.rcv.peer_finished() && self.readable_bytes() == 0
    }
}

/// Largest chunk `send_bytes` queues as one framer entry (segments coalesce across them).
const MAX_CHUNK: usize = 64 * 1024;
