//! The receive buffers one side keeps posted. Every SEND the peer makes takes the next posted
//! buffer in order, whatever it is (data, reply or control message), so all buffers have one
//! length, large enough for any of them, and a few more than the data needs are always posted
//! for control messages (accept, done, statistics). A data SEND carries an immediate and a
//! control message none, which is how completions are told apart.

use super::ctrl::CTRL_MAX;
use super::{PerfConfig, PerfError, PerfOp, REPLY_LEN};

use tcp_bth::{CallError, Connection};

/// Buffers posted beyond the data's for control messages: at most two can be on their way at
/// once (done and statistics at the end).
const CTRL_SLOTS: u64 = 2;

pub(crate) struct RecvPool {
    buf_len: usize,
    /// Buffers to keep posted.
    want: u64,
    posted: u64,
    used: u64,
    /// Buffers of completed receives, to post again.
    spare: Vec<Vec<u8>>,
}

/// Most spare buffers kept (beyond what stays posted, spares only come from completions).
const SPARE_MAX: u16 = 64;

impl RecvPool {
    /// For the client (`client`) or the server of a run of `cfg`.
    pub fn new(cfg: &PerfConfig, client: bool) -> RecvPool {
        // Which SENDs of data come in: the requester's SENDs at the server (and at the client
        // with -b), the server's replies at a request/response client.
        let replies = client && cfg.op == PerfOp::SendRecv;
        let data = cfg.op.sends() && (!client || cfg.mode.bidir);
        let data_len = if replies {
            REPLY_LEN
        } else if data {
            cfg.size as usize
        } else {
            0
        };
        let data_slots = if replies || data {
            cfg.rx_depth as u64
        } else {
            0
        };
        RecvPool {
            buf_len: data_len.max(CTRL_MAX),
            want: CTRL_SLOTS + data_slots,
            posted: 0,
            used: 0,
            spare: Vec::new(),
        }
    }

    /// A posted buffer was filled (a receive completed).
    pub fn used_one(&mut self) {
        self.used += 1;
    }

    /// A completed receive's buffer, done with: posted again by the next top-up instead of a
    /// fresh allocation (its old bytes need no clearing: placement overwrites what a message
    /// fills, and a completion says how many bytes that is).
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if buf.len() == self.buf_len && self.spare.len() < usize::from(SPARE_MAX) {
            self.spare.push(buf);
        }
    }

    /// Post buffers until `want` are outstanding; true if any was posted.
    pub fn top_up(&mut self, c: &mut Connection) -> Result<bool, PerfError> {
        let mut fresh = false;
        while self.posted - self.used < self.want {
            let buf = self.spare.pop().unwrap_or_else(|| vec![0u8; self.buf_len]);
            match c.post_recv(self.posted, buf) {
                Ok(()) => {}
                // The stack's limit of posted receives (`Config::max_posted_recvs`): the rest
                // is posted as these complete.
                Err(e)
                    if matches!(
                        e.kind,
                        CallError::Placement(bth_placement::PostRecvError::Full { .. })
                    ) =>
                {
                    break
                }
                Err(e) => return Err(PerfError::Post(e.kind)),
            }
            self.posted += 1;
            fresh = true;
        }
        Ok(fresh)
    }
}
