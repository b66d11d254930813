//! The verbs-like work-request API (tcp_bth mode): memory regions, receives, SEND / RDMA WRITE
//! / RDMA READ. As on an IB RC QP, once the connection has failed every new work request is
//! accepted and completes at once with `WrFlushError` (its buffer handed back in the
//! completion); a call is refused only when it could never have been valid (wrong mode, bad
//! arguments) or after an orderly close.

use super::*;
use bth_framer::{WorkRequest, WrError, WrOp};
use bth_placement::{Access, MrHandle};

/// A range of one of our registered regions: `offset` bytes from its start, `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// The region's key (its rkey: one key serves both sides here).
    pub lkey: u32,
    /// Bytes from the region's start.
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

/// How a post goes on: into the QP, or straight to a flush completion.
enum Admit {
    Open,
    Flush,
}

impl Connection {
    fn require_bth(&self) -> Result<(), CallError> {
        match self.mode {
            Mode::Bth { .. } => Ok(()),
            Mode::Plain => Err(CallError::NotBth),
            Mode::Pending => Err(CallError::NotEstablished),
        }
    }

    /// New work is refused after `close()` and in TIME-WAIT / CLOSED after an orderly close.
    pub(super) fn require_open(&self) -> Result<(), CallError> {
        if let Some(e) = &self.error {
            return Err(CallError::Ended(e.clone()));
        }
        if self.snd.fin() != handshake::Fin::None
            || matches!(self.state, State::Closed | State::TimeWait)
        {
            return Err(CallError::Closed);
        }
        Ok(())
    }

    /// BTH mode and a QP that takes work: open, or failed (then the post completes flushed).
    fn admit(&self) -> Result<Admit, CallError> {
        if self.error.is_some() && self.mode != Mode::Plain {
            return Ok(Admit::Flush);
        }
        self.require_bth()?;
        self.require_open()?;
        Ok(Admit::Open)
    }

    /// A work request posted to a failed QP completes at once, flushed. Its MSN is the one it
    /// would have had; nothing will ever be sent under it.
    fn flushed(&mut self, wr_id: u64, class: MsgClass, op: WcOp, buf: Option<Vec<u8>>) -> u16 {
        let counter = match class {
            MsgClass::ReadResponse => MsgClass::ReadRequest,
            c => c,
        };
        let msn = self.snd.framer.next_msn(counter).unwrap_or(0);
        self.cq.push(Completion {
            wr_id,
            class,
            msn,
            op,
            byte_len: 0,
            imm: None,
            status: WcStatus::WrFlushError,
            buf,
        });
        msn
    }

    /// Register `buf` as a memory region; on refusal the buffer comes back.
    pub fn register_mr(&mut self, buf: Vec<u8>, access: Access) -> Result<MrHandle, RegisterError> {
        let RxPath::Bth(rx) = &mut self.rx else {
            return Err(Rejected::new(CallError::NotBth, buf));
        };
        rx.placement
            .regions_mut()
            .register(buf, access)
            .map_err(|r| Rejected::new(r.error, r.buf))
    }

    /// Deregister the memory region `rkey` and hand its buffer back; the rkey is dead from
    /// now on (a peer's later WRITE or READ of it is an access error).
    pub fn deregister_mr(&mut self, rkey: u32) -> Result<Vec<u8>, CallError> {
        let RxPath::Bth(rx) = &mut self.rx else {
            return Err(CallError::NotBth);
        };
        Ok(rx.placement.regions_mut().deregister(rkey)?)
    }

    /// Contents of a registered region (after a completion says a WRITE landed).
    pub fn mr_bytes(&self, rkey: u32) -> Option<&[u8]> {
        match &self.rx {
            RxPath::Bth(rx) => rx.placement.regions().bytes(rkey),
            RxPath::Plain(_) => None,
        }
    }

    /// Write `data` at byte `offset` of one of our regions, between operations (the region
    /// needs LOCAL_WRITE). The rkey stays the same, so a peer's later READ sees the new bytes
    /// without a new registration. As in verbs, writing a region while a peer's WRITE or READ
    /// of it is in flight gives whatever bytes were there when each segment was served.
    pub fn mr_write(&mut self, rkey: u32, offset: usize, data: &[u8]) -> Result<(), CallError> {
        let RxPath::Bth(rx) = &mut self.rx else {
            return Err(CallError::NotBth);
        };
        Ok(rx.placement.regions_mut().write_local(rkey, offset, data)?)
    }

    /// Post a SEND or RDMA WRITE whose bytes come from our registered regions, one
    /// scatter/gather entry per range (`lkey` is the region's key: one key serves both
    /// sides here). The ranges are checked first and copied, together, into one buffer of the
    /// connection's when the request is posted: the application may change the region right
    /// after (verbs would read it at send time and forbid that until the completion). That
    /// copy is the bytes' one user-space copy on send (`Stats::tx_payload_staged`): their
    /// segments leave from it without another where the driver gathers. On refusal nothing
    /// is posted.
    pub fn post_send_sg(&mut self, wr_id: u64, op: WrOp, sg: &[Sge]) -> Result<u16, CallError> {
        let RxPath::Bth(rx) = &self.rx else {
            return Err(CallError::NotBth);
        };
        let regions = rx.placement.regions();
        let mut ranges = Vec::with_capacity(sg.len());
        for e in sg {
            let oob = bth_placement::MrError::OutOfBounds {
                rkey: e.lkey,
                addr: e.offset,
                len: u64::from(e.len),
            };
            let bytes = regions
                .bytes(e.lkey)
                .ok_or(bth_placement::MrError::UnknownRkey(e.lkey))?;
            let start = usize::try_from(e.offset).map_err(|_| oob)?;
            let end = start.checked_add(e.len as usize).ok_or(oob)?;
            ranges.push(bytes.get(start..end).ok_or(oob)?);
        }
        // Summed in u64 so that no list of entries can overflow. The framer's own check of
        // the length, made here before the buffer is allocated rather than after.
        let total: u64 = ranges.iter().map(|r| r.len() as u64).sum();
        let max = self.snd.framer.max_message_len();
        if total > u64::from(max) {
            return Err(CallError::Post(bth_framer::WrError::TooLarge {
                len: total,
                max,
            }));
        }
        let mut staged = bytes::BytesMut::with_capacity(total as usize);
        for r in ranges {
            staged.extend_from_slice(r);
        }
        self.stats.tx_payload_staged += total;
        let wr = WorkRequest {
            wr_id,
            op,
            sg_list: vec![staged.freeze()],
        };
        self.post_work(wr, true).map_err(|r| r.kind)
    }

    /// Post a receive buffer for the next incoming SEND; advertises the new credit. Allowed
    /// before the handshake finishes. On refusal the buffer comes back.
    pub fn post_recv(&mut self, wr_id: u64, buf: Vec<u8>) -> Result<(), PostBufError> {
        if self.error.is_some() && self.mode != Mode::Plain {
            // A receive has no MSN of ours: the completion's MSN is not meaningful.
            self.flushed(wr_id, MsgClass::Send, WcOp::Recv, Some(buf));
            return Ok(());
        }
        let RxPath::Bth(rx) = &mut self.rx else {
            return Err(Rejected::new(CallError::NotBth, buf));
        };
        rx.placement
            .post_recv(wr_id, buf)
            .map_err(|r| Rejected::new(r.error, r.buf))?;
        self.owed.ack = true;
        self.owed.credit = true;
        Ok(())
    }

    /// Post a SEND or RDMA WRITE (with or without immediate, zero-length allowed); returns its
    /// MSN. On refusal the work request comes back.
    pub fn post_send(&mut self, wr: WorkRequest) -> Result<u16, PostSendError> {
        self.post_work(wr, false)
    }

    /// [`post_send`](Self::post_send); `staged`: the request's bytes are the connection's own
    /// copy (`bth_framer::Framer::post_staged`).
    fn post_work(&mut self, wr: WorkRequest, staged: bool) -> Result<u16, PostSendError> {
        let class = match wr.op {
            WrOp::Send { .. } => MsgClass::Send,
            WrOp::RdmaWrite { .. } => MsgClass::Write,
            WrOp::RdmaRead { .. } => return Err(Rejected::new(CallError::ReadViaPostSend, wr)),
        };
        match self.admit() {
            Err(e) => return Err(Rejected::new(e, wr)),
            Ok(Admit::Flush) => {
                let op = match class {
                    MsgClass::Send => WcOp::Send,
                    _ => WcOp::RdmaWrite,
                };
                return Ok(self.flushed(wr.wr_id, class, op, None));
            }
            Ok(Admit::Open) => {}
        }
        // The framer consumes the request; a copy of its handles (reference counts, not
        // payload bytes) is what a refusal hands back.
        let keep = wr.clone();
        let framer = &mut self.snd.framer;
        let posted = if staged {
            framer.post_staged(wr)
        } else {
            framer.post(wr)
        };
        posted.map(|p| p.msn).map_err(|e| Rejected::new(e, keep))
    }

    /// Post an RDMA READ of `len = sink.len()` bytes at the peer's `rkey`/`remote_addr` into `sink`.
    ///
    /// Transactional: either the READ is registered with placement *and* queued in the framer,
    /// or nothing changed (no MSN consumed, no request sent) and the sink comes back. The
    /// response is sent to us, so it may be no longer than the largest message we announced;
    /// a longer READ is refused here rather than dropped by the responder later.
    pub fn post_read(
        &mut self,
        wr_id: u64,
        rkey: u32,
        remote_addr: u64,
        sink: Vec<u8>,
    ) -> Result<u16, PostBufError> {
        match self.admit() {
            Err(e) => return Err(Rejected::new(e, sink)),
            Ok(Admit::Flush) => {
                let op = WcOp::RdmaRead;
                return Ok(self.flushed(wr_id, MsgClass::ReadResponse, op, Some(sink)));
            }
            Ok(Admit::Open) => {}
        }
        let len = u32::try_from(sink.len()).unwrap_or(u32::MAX);
        let max = self.cfg.max_message_len.min(crate::wire::MAX_MESSAGE_LEN);
        if len > max {
            return Err(Rejected::new(WrError::ReadTooLarge { len, max }, sink));
        }
        let RxPath::Bth(rx) = &mut self.rx else {
            return Err(Rejected::new(CallError::NotBth, sink));
        };
        let msn = self
            .snd
            .framer
            .next_msn(MsgClass::ReadRequest)
            .expect("READ requests are numbered");
        // Placement first: it refuses (full, flushed) without a trace, before any MSN is used.
        // Its bound on outstanding READs (below 2^15) also keeps READ MSNs from aliasing.
        rx.placement
            .expect_read_response(msn, wr_id, sink)
            .map_err(|r| Rejected::new(r.error, r.buf))?;
        let posted = self
            .snd
            .framer
            .post(WorkRequest::read(wr_id, rkey, remote_addr, len));
        match posted {
            Ok(p) => {
                debug_assert_eq!(p.msn, msn, "framer and placement number READs alike");
                // The sink's bytes join our grant: the responder may need it for the response.
                self.note_grant_growth();
                Ok(msn)
            }
            Err(e) => {
                // Refused by the framer's own checks: take the registration back.
                let sink = rx.placement.cancel_read(msn).unwrap_or_default();
                Err(Rejected::new(e, sink))
            }
        }
    }
}
