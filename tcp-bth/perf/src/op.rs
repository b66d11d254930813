//! The operations a perf run measures (`--op`) and their names on the command line.

use std::fmt;
use thiserror::Error;

/// The operation a run measures (`--op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfOp {
    /// SEND with immediate: each message takes one of the responder's receive buffers.
    Send,
    /// Plain RDMA WRITE (no immediate): the server sees no message, only the client's done
    /// message at the end, and then checks its target region (see the module docs).
    Write,
    /// RDMA WRITE with immediate (so the server sees each message).
    WriteImm,
    /// RDMA READ of `size` bytes from the server's READ source (`tx_depth` slots).
    Read,
    /// SEND, WRITE with immediate, READ in turn.
    Mixed,
    /// Request/response: the client SENDs a message and waits for the server's small SEND
    /// back ([`super::REPLY_LEN`] bytes); a message completes when its reply arrives.
    SendRecv,
}

impl PerfOp {
    /// Every operation, in the order the CLI lists them.
    pub const ALL: [PerfOp; 6] = [
        PerfOp::Send,
        PerfOp::Write,
        PerfOp::WriteImm,
        PerfOp::Read,
        PerfOp::Mixed,
        PerfOp::SendRecv,
    ];

    /// The name `from_str` takes (and `Display` prints).
    pub fn name(self) -> &'static str {
        match self {
            PerfOp::Send => "send",
            PerfOp::Write => "write",
            PerfOp::WriteImm => "write-imm",
            PerfOp::Read => "read",
            PerfOp::Mixed => "mixed",
            PerfOp::SendRecv => "sendrecv",
        }
    }

    /// The byte on the wire (the client's hello), and back.
    pub(crate) fn code(self) -> u8 {
        match self {
            PerfOp::Send => 1,
            PerfOp::Write => 2,
            PerfOp::WriteImm => 3,
            PerfOp::Read => 4,
            PerfOp::Mixed => 5,
            PerfOp::SendRecv => 6,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<PerfOp> {
        PerfOp::ALL.into_iter().find(|op| op.code() == code)
    }

    /// Whether the requester's messages include SENDs, which take the responder's receive
    /// buffers.
    pub(crate) fn sends(self) -> bool {
        matches!(self, PerfOp::Send | PerfOp::Mixed | PerfOp::SendRecv)
    }
}

impl fmt::Display for PerfOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `PerfOp::from_str` was given a name it does not know.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{input}: expected {}", valid_op_names())]
pub struct ParseOpError {
    /// What was given.
    pub input: String,
}

/// "send, write, …, mixed or sendrecv".
fn valid_op_names() -> String {
    let names: Vec<&str> = PerfOp::ALL.iter().map(|op| op.name()).collect();
    match names.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl std::str::FromStr for PerfOp {
    type Err = ParseOpError;
    fn from_str(s: &str) -> Result<PerfOp, ParseOpError> {
        let lower = s.to_ascii_lowercase();
        match lower.as_str() {
            "rr" => Ok(PerfOp::SendRecv),
            "write_imm" => Ok(PerfOp::WriteImm),
            name => PerfOp::ALL
                .into_iter()
                .find(|op| op.name() == name)
                .ok_or_else(|| ParseOpError {
                    input: s.to_owned(),
                }),
        }
    }
}
