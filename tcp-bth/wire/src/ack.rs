//! What an ACKNOWLEDGE option says besides credit: the low 8 bits of its `mbo_seg` field are an
//! IBTA AETH syndrome byte. 0 on every ordinary ACK ("ACK", no credit count: credit travels with
//! R=1); a NAK names the failed message and why, so the requester completes that work request
//! with the error IB RC would give it.
//!
//! A NAK is fatal (IB: the QP goes to the error state on both sides), so it travels on the RST
//! that ends the connection: opcode ACKNOWLEDGE, R=0, MSN = the failed message's MSN in its own
//! class, the 24-bit offset field = the opcode of the offending segment (which names the class),
//! low 8 bits = the syndrome. Still the 24-byte layout the C prototype parses.

use crate::bth::Bth;
use crate::message::MsgClass;
use crate::opcode::Opcode;
use core::fmt;

/// NAK codes of the IBTA AETH (syndrome `011x_xxxx`) that an RC responder reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NakCode {
    /// The request could not be carried out as asked: a SEND longer than the posted receive,
    /// an RDMA READ longer than the requester accepts, a message that broke the protocol.
    InvalidRequest,
    /// rkey unknown, access right missing, or the range outside the region.
    RemoteAccess,
    /// The responder failed for a reason of its own.
    RemoteOperational,
}

impl NakCode {
    const NAK: u8 = 0x60;

    /// The AETH syndrome byte (0x61, 0x62 or 0x63) that goes in the low 8 bits of `mbo_seg`.
    pub const fn syndrome(self) -> u8 {
        Self::NAK
            | match self {
                NakCode::InvalidRequest => 1,
                NakCode::RemoteAccess => 2,
                NakCode::RemoteOperational => 3,
            }
    }

    /// The code a syndrome byte names; `None` for anything but 0x61-0x63 (0x00, the ordinary
    /// ACK, included).
    pub const fn from_syndrome(s: u8) -> Option<NakCode> {
        match s {
            0x61 => Some(NakCode::InvalidRequest),
            0x62 => Some(NakCode::RemoteAccess),
            0x63 => Some(NakCode::RemoteOperational),
            _ => None,
        }
    }
}

impl fmt::Display for NakCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NakCode::InvalidRequest => "remote invalid request",
            NakCode::RemoteAccess => "remote access error",
            NakCode::RemoteOperational => "remote operational error",
        })
    }
}

/// A NAK: which message of the requester failed at the responder, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Nak {
    /// Why it failed: the syndrome in the low 8 bits of `mbo_seg`.
    pub code: NakCode,
    /// Opcode of the segment that failed (its class says which MSN counter `msn` is in).
    pub opcode: Opcode,
    /// MSN of the failed message, in its own class's counter.
    pub msn: u16,
}

impl Nak {
    /// The MSN counter `msn` is in, from `opcode`; `None` only for a value built by hand with a
    /// non-data opcode ([`from_bth`](Self::from_bth) never returns one).
    pub fn class(&self) -> Option<MsgClass> {
        MsgClass::of(self.opcode)
    }

    /// The option fields of this NAK (ICRC and timestamps left for the sender to fill).
    pub fn to_bth(&self) -> Bth {
        Bth {
            msn: self.msn,
            mbo: u32::from(self.opcode.as_u8()),
            seg: self.code.syndrome(),
            ..Bth::new(Opcode::Acknowledge)
        }
    }

    /// The NAK an ACKNOWLEDGE option carries, if any: R=0, a NAK syndrome, and a data opcode
    /// in the offset field. Anything else (an ordinary ACK, a credit update) is `None`.
    pub fn from_bth(b: &Bth) -> Option<Nak> {
        if b.opcode != Opcode::Acknowledge || b.rtr {
            return None;
        }
        let code = NakCode::from_syndrome(b.seg)?;
        let opcode = u8::try_from(b.mbo)
            .ok()
            .and_then(Opcode::from_u8)
            .filter(|&o| MsgClass::of(o).is_some())?;
        Some(Nak {
            code,
            opcode,
            msn: b.msn,
        })
    }
}

impl fmt::Display for Nak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NAK {} for {} MSN {}", self.code, self.opcode, self.msn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nak_round_trips_through_the_option_bytes() {
        for code in [
            NakCode::InvalidRequest,
            NakCode::RemoteAccess,
            NakCode::RemoteOperational,
        ] {
            for op in [
                Opcode::SendOnly,
                Opcode::RdmaWriteFirst,
                Opcode::RdmaReadRequest,
            ] {
                let nak = Nak {
                    code,
                    opcode: op,
                    msn: 0xfffe,
                };
                let mut b = nak.to_bth();
                b.timestamps = Some(crate::Timestamps { tsval: 1, tsecr: 2 });
                b.seal(&[]);
                let bytes = b.to_vec().expect("emits");
                assert_eq!(bytes.len(), 24, "the prototype's 24-byte layout");
                let back = Bth::from_bytes(&bytes).expect("parses");
                assert_eq!(Nak::from_bth(&back), Some(nak));
            }
        }
    }

    #[test]
    fn ordinary_acks_and_credit_updates_are_not_naks() {
        let ack = Bth::new(Opcode::Acknowledge);
        assert_eq!(Nak::from_bth(&ack), None);
        let credit = Bth {
            rtr: true,
            seg: 0x62,
            mbo: u32::from(Opcode::SendOnly.as_u8()),
            ..ack
        };
        assert_eq!(Nak::from_bth(&credit), None, "R=1: mbo is a grant");
        let no_class = Bth {
            seg: 0x62,
            mbo: u32::from(Opcode::Acknowledge.as_u8()),
            ..ack
        };
        assert_eq!(Nak::from_bth(&no_class), None);
    }
}
