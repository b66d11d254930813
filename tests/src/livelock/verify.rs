//! Checking what lands against what was posted: completions (SEND buffers, WRITE ranges,
//! READ sinks) and the plain byte stream; and the regions those checks read.

use super::{conn, conn_ref, End, Failure, FailureKind, Harness, Side, Step, Workload};
use bth_io::sim::workload::{filled, matches_fill};
use bth_io::sim::Pair;
use bth_placement::{Access, WcStatus};
use tcp_bth::{Completion, WcOp};

impl Harness<'_> {
    /// Plain mode: read everything readable at `side` and compare it with what was sent.
    pub(super) fn read(&mut self, side: Side) -> Result<(), Failure> {
        let mut buf = [0u8; 65536];
        loop {
            let n = conn(&mut self.p, side).recv_bytes(&mut buf);
            if n == 0 {
                return Ok(());
            }
            let e = &mut self.ends[side.index()];
            let at = e.read;
            if e.stream.get(at..at + n) != Some(&buf[..n]) {
                let what = format!(
                    "{side:?} read {n} bytes at stream offset {at} that differ from what was \
                     sent ({} bytes sent)",
                    e.stream.len()
                );
                return Err(self.fail(FailureKind::Wrong, what));
            }
            e.read += n;
            self.bytes_read += n as u64;
            self.bytes_verified += n as u64;
        }
    }

    /// Check one completion at `side` against what was posted.
    pub(super) fn completion(&mut self, side: Side, c: Completion) -> Result<(), Failure> {
        let seed = self.w.seed;
        let wrong = |h: &Harness, what: &str| {
            let c = format!(
                "{side:?} completion wr_id {} {:?} {:?} msn {} len {} imm {:?}: {what}",
                c.wr_id, c.op, c.status, c.msn, c.byte_len, c.imm
            );
            h.fail(FailureKind::Wrong, c)
        };
        if c.status != WcStatus::Success {
            return Err(wrong(self, "not a success"));
        }
        let e = &mut self.ends[side.index()];
        let (len, id, bytes_ok) = match c.op {
            WcOp::Send | WcOp::RdmaWrite | WcOp::RdmaRead => {
                let Some(p) = e.posted.remove(&c.wr_id).filter(|p| p.op == c.op) else {
                    return Err(wrong(self, "no such work request outstanding"));
                };
                let ok = match p.op {
                    WcOp::RdmaWrite => {
                        // Acknowledged, so placed: the peer's region holds it now.
                        let rkey = self.ends[side.peer().index()].target.map(|t| t.rkey);
                        let peer = conn_ref(&self.p, side.peer());
                        let region = rkey.and_then(|k| peer.mr_bytes(k));
                        let at = p.offset as usize;
                        region
                            .and_then(|r| r.get(at..at + p.len as usize))
                            .is_some_and(|got| matches_fill(seed, p.id, got))
                    }
                    WcOp::RdmaRead => {
                        let src = &self.ends[side.peer().index()].source_bytes;
                        let at = p.offset as usize;
                        c.buf.as_deref() == src.get(at..at + p.len as usize)
                    }
                    _ => true,
                };
                let ok = ok && (p.op != WcOp::RdmaRead || c.byte_len == p.len);
                // Bytes count once per message: at the receiver for SENDs and WRITEs with
                // immediate, here for plain WRITEs and READs.
                (if p.counted_here { p.len } else { 0 }, p.id, ok)
            }
            WcOp::Recv => {
                let Some(r) = e.posted_recvs.pop_front().filter(|r| r.id == c.wr_id) else {
                    return Err(wrong(self, "not the oldest posted receive"));
                };
                let buf = c.buf.as_deref().and_then(|b| b.get(..r.len as usize));
                let ok = c.byte_len == r.len
                    && c.imm == r.imm
                    && buf.is_some_and(|b| matches_fill(seed, r.id, b));
                (r.len, r.id, ok)
            }
            WcOp::RecvRdmaWithImm => {
                let Some(p) = c.imm.and_then(|i| e.imm_writes.remove(&i)) else {
                    return Err(wrong(self, "no WRITE with this immediate expected"));
                };
                let rkey = e.target.map(|t| t.rkey);
                let region = rkey.and_then(|k| conn_ref(&self.p, side).mr_bytes(k));
                let at = p.offset as usize;
                let got = region.and_then(|r| r.get(at..at + p.len as usize));
                let ok = c.byte_len == p.len && got.is_some_and(|g| matches_fill(seed, p.id, g));
                (p.len, p.id, ok)
            }
        };
        if !bytes_ok {
            return Err(wrong(
                self,
                &format!("bytes of message {id} differ from what was sent"),
            ));
        }
        self.completions += 1;
        self.ops_verified += 1;
        self.bytes_verified += u64::from(len);
        Ok(())
    }
}

/// Register `side`'s regions: a target as large as the peer's WRITEs together, a source
/// (filled with a pattern) reaching the end of the peer's furthest READ.
pub(super) fn register(p: &mut Pair, e: &mut End, w: &Workload, side: Side) {
    let peer = side.peer();
    let (mut target, mut source) = (0u64, 0u64);
    for s in &w.steps {
        match *s {
            Step::Write { from, len, .. } if from == peer => target += u64::from(len),
            Step::Read { from, len, offset } if from == peer => {
                source = source.max(u64::from(offset) + u64::from(len));
            }
            _ => {}
        }
    }
    let c = conn(p, side);
    let rw = Access::REMOTE_WRITE | Access::LOCAL_WRITE;
    let t = c.register_mr(vec![0u8; target.max(1) as usize], rw);
    e.target = Some(t.unwrap_or_else(|r| panic!("register target: {:?}", r.kind)));
    e.source_bytes = filled(
        w.seed,
        u64::MAX - side.index() as u64,
        source.max(1) as usize,
    );
    let s = c.register_mr(e.source_bytes.clone(), Access::REMOTE_READ);
    e.source = Some(s.unwrap_or_else(|r| panic!("register source: {:?}", r.kind)));
}
