//! The incast's messages (`sim/incast.rs`): what each sender posts, the receives and regions
//! the receiver keeps for it, and when each message completed at the receiver.

use super::incast::{ok, payload, write_wr, TARGET};
use super::incast::{IncastConfig, IncastError, IncastOp, IncastReport};
use bth_framer::{WorkRequest, WrOp};
use bth_placement::MrHandle;
use bytes::Bytes;
use std::time::Duration;
use tcp_bth::{Connection, WcOp};

pub(super) struct Work {
    op: IncastOp,
    messages: usize,
    len: u32,
    depth: usize,
    seed: u64,
    /// The receiver's region for each sender's WRITEs.
    regions: Vec<Option<MrHandle>>,
    /// Messages each sender keeps posted and not yet completed at its side.
    window: usize,
    /// Receives posted so far for each sender's SENDs.
    recvs: Vec<usize>,
    /// Per sender: messages posted, and completed at the sender (acknowledged).
    posted: Vec<usize>,
    acked: Vec<usize>,
    /// When each message of each sender was posted, and how long it took to complete at the
    /// receiver.
    post_at: Vec<Vec<Duration>>,
    took: Vec<Vec<Option<Duration>>>,
    completed: usize,
}

impl Work {
    pub fn new(cfg: &IncastConfig, n: usize) -> Work {
        Work {
            op: cfg.op,
            messages: cfg.messages,
            len: cfg.message_len,
            depth: cfg.recv_depth.max(1),
            seed: cfg.link.seed,
            regions: vec![None; n],
            window: cfg.window.max(1),
            recvs: vec![0; n],
            posted: vec![0; n],
            acked: vec![0; n],
            post_at: vec![Vec::with_capacity(cfg.messages); n],
            took: vec![vec![None; cfg.messages]; n],
            completed: 0,
        }
    }

    pub fn expected(&self) -> usize {
        self.took.len() * self.messages
    }

    pub fn completed(&self) -> usize {
        self.completed
    }

    pub fn done(&self) -> bool {
        self.completed == self.expected()
    }

    fn post_recv(&mut self, i: usize, c: &mut Connection) -> Result<(), IncastError> {
        c.post_recv(self.recvs[i] as u64, vec![0; self.len as usize])
            .map_err(|e| IncastError::PostRecv {
                sender: i,
                source: e.kind,
            })?;
        self.recvs[i] += 1;
        Ok(())
    }

    /// The receiver's side before the burst: a region per sender (WRITE) or the first
    /// `recv_depth` receives (SEND).
    pub fn prepare(&mut self, rx: &mut [Option<Connection>]) -> Result<(), IncastError> {
        for (i, c) in rx.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            match self.op {
                IncastOp::WriteImm => {
                    let bytes = self.messages * self.len as usize;
                    let mr = c.register_mr(vec![0; bytes.max(1)], TARGET).map_err(|e| {
                        IncastError::PostRecv {
                            sender: i,
                            source: e.kind,
                        }
                    })?;
                    self.regions[i] = Some(mr);
                }
                IncastOp::Send => {
                    while self.recvs[i] < self.depth.min(self.messages) {
                        self.post_recv(i, c)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Each sender tops up to `window` messages outstanding, posted at `now`.
    pub fn post_more(
        &mut self,
        senders: &mut [Connection],
        now: Duration,
    ) -> Result<(), IncastError> {
        for (i, s) in senders.iter_mut().enumerate() {
            while self.posted[i] < self.messages && self.posted[i] - self.acked[i] < self.window {
                let k = self.posted[i];
                let data = payload(self.seed, i, k, self.len);
                let wr = match (self.op, &self.regions[i]) {
                    (IncastOp::WriteImm, Some(mr)) => write_wr(mr, k, data),
                    _ => WorkRequest {
                        wr_id: k as u64,
                        op: WrOp::Send {
                            imm: Some(k as u32),
                        },
                        sg_list: vec![Bytes::from(data)],
                    },
                };
                s.post_send(wr).map_err(|e| IncastError::Post {
                    sender: i,
                    source: e.kind,
                })?;
                self.post_at[i].push(now);
                self.posted[i] += 1;
            }
        }
        Ok(())
    }

    /// Take the completions of both sides at `now`; repost receives, post more messages.
    pub fn collect(
        &mut self,
        senders: &mut [Connection],
        rx: &mut [Option<Connection>],
        now: Duration,
    ) -> Result<(), IncastError> {
        for (i, s) in senders.iter_mut().enumerate() {
            while let Some(c) = s.poll_completion() {
                if !ok(&c, WcOp::RdmaWrite) && !ok(&c, WcOp::Send) {
                    return Err(IncastError::Failed {
                        sender: i,
                        completion: c,
                    });
                }
                self.acked[i] += 1;
            }
        }
        for (i, r) in rx.iter_mut().enumerate() {
            let Some(r) = r else { continue };
            while let Some(c) = r.poll_completion() {
                let want = match self.op {
                    IncastOp::WriteImm => WcOp::RecvRdmaWithImm,
                    IncastOp::Send => WcOp::Recv,
                };
                let k = c.imm.map_or(usize::MAX, |k| k as usize);
                let slot = self.took[i].get_mut(k);
                let Some(slot) = slot.filter(|s| s.is_none() && ok(&c, want)) else {
                    return Err(IncastError::Failed {
                        sender: i,
                        completion: c,
                    });
                };
                if self.op == IncastOp::Send
                    && c.buf.as_deref() != Some(&payload(self.seed, i, k, self.len)[..])
                {
                    return Err(IncastError::Mismatch {
                        sender: i,
                        message: k,
                    });
                }
                let posted = self.post_at[i].get(k).copied().unwrap_or(now);
                *slot = Some(now.saturating_sub(posted));
                self.completed += 1;
                if self.op == IncastOp::Send && self.recvs[i] < self.messages {
                    self.post_recv(i, r)?;
                }
            }
        }
        self.post_more(senders, now)
    }

    /// Every WRITE's bytes are where they were sent to (SENDs were checked on completion).
    pub fn verify(&self, rx: &[Option<Connection>]) -> Result<(), IncastError> {
        for (i, (r, mr)) in rx.iter().zip(&self.regions).enumerate() {
            let (Some(r), Some(mr)) = (r, mr) else {
                continue;
            };
            let bytes = r.mr_bytes(mr.rkey).unwrap_or_default();
            for k in 0..self.messages {
                let at = k * self.len as usize;
                let got = bytes.get(at..at + self.len as usize);
                if got != Some(&payload(self.seed, i, k, self.len)[..]) {
                    return Err(IncastError::Mismatch {
                        sender: i,
                        message: k,
                    });
                }
            }
        }
        Ok(())
    }

    /// Completion-time percentiles and goodput over `elapsed` (the transport's counters are
    /// the caller's).
    pub fn report(&self, admission: bool, elapsed: Duration) -> IncastReport {
        let mut t: Vec<Duration> = self.took.iter().flatten().flatten().copied().collect();
        t.sort_unstable();
        // Nearest rank: the smallest value with at least q of the samples at or below it.
        let pct = |q: f64| {
            let rank = ((q * t.len() as f64).ceil() as usize).clamp(1, t.len().max(1));
            t.get(rank - 1).copied().unwrap_or_default()
        };
        let bytes = t.len() as f64 * f64::from(self.len);
        IncastReport {
            admission,
            messages: t.len(),
            p50: pct(0.50),
            p99: pct(0.99),
            max: t.last().copied().unwrap_or_default(),
            elapsed,
            goodput_gbps: if elapsed.is_zero() {
                0.0
            } else {
                bytes * 8.0 / elapsed.as_secs_f64() / 1e9
            },
            ..IncastReport::default()
        }
    }
}
