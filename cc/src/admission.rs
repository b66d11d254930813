//! Receiver-driven admission (clear-to-send), as in NCCL's receiver-side credits: the data
//! receiver grants the bytes it has buffers posted for, and the sender keeps its bytes in
//! flight within the latest grant.

/// Bytes per grant unit (4 KiB).
pub const GRANT_UNIT: u64 = 4096;

/// Largest grant the 24-bit field carries, in units (2^24 - 1, just under 64 GiB).
pub const MAX_GRANT_UNITS: u32 = (1 << 24) - 1;

/// Sender-side state of receiver-driven admission.
///
/// The peer (the data receiver) advertises a grant: how many bytes it can take, in 4 KiB units
/// in a 24-bit field. The latest grant replaces the previous one, so a receiver can also
/// shrink it. The sender may have at most the grant in flight.
///
/// This is one of three limits on the sender, each a window of bytes in flight; the stack
/// sends only while `bytes_in_flight < min(cwnd, peer rwnd, admission window)`, i.e.
/// it may send `min(cwnd, rwnd, self.window()) - bytes_in_flight` (saturating) more bytes.
/// [`ReceiverAdmission::allowed`] is the admission term of that on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReceiverAdmission {
    /// Latest grant in bytes; None before the first one.
    grant: Option<u64>,
    /// Window used while no grant has arrived.
    before_first: u64,
}

impl Default for ReceiverAdmission {
    fn default() -> Self {
        ReceiverAdmission::new()
    }
}

impl ReceiverAdmission {
    /// No grant yet: admission does not limit the sender until the first grant arrives (the
    /// peer may not use admission at all; cwnd and rwnd still apply).
    pub const fn new() -> ReceiverAdmission {
        ReceiverAdmission {
            grant: None,
            before_first: u64::MAX,
        }
    }

    /// Strict clear-to-send: nothing may be sent until the first grant arrives.
    pub const fn closed() -> ReceiverAdmission {
        ReceiverAdmission {
            grant: None,
            before_first: 0,
        }
    }

    /// Bytes a grant of `grant_units` stands for. Units beyond the 24-bit field are clamped to
    /// [`MAX_GRANT_UNITS`] (a caller that passes more has not decoded a 24-bit field); the
    /// product cannot overflow `u64`, and is computed saturating anyway.
    pub fn units_to_bytes(grant_units: u32) -> u64 {
        u64::from(grant_units.min(MAX_GRANT_UNITS)).saturating_mul(GRANT_UNIT)
    }

    /// A grant arrived from the peer: it replaces the previous one.
    pub fn on_grant(&mut self, grant_units: u32) {
        self.grant = Some(Self::units_to_bytes(grant_units));
    }

    /// The latest grant in bytes, if any has arrived.
    pub fn grant(&self) -> Option<u64> {
        self.grant
    }

    /// The admission window in bytes: the latest grant, or before the first grant
    /// `u64::MAX` ([`ReceiverAdmission::new`]) or 0 ([`ReceiverAdmission::closed`]).
    pub fn window(&self) -> u64 {
        self.grant.unwrap_or(self.before_first)
    }

    /// Bytes the sender may still send: grant minus bytes in flight, 0 if already at or over
    /// the grant (a shrunk grant never underflows).
    pub fn allowed(&self, bytes_in_flight: u64) -> u64 {
        self.window().saturating_sub(bytes_in_flight)
    }

    /// Receiver side: the grant to advertise for `free_posted_bytes` of posted, unused buffer
    /// space. Rounded down to whole units (never grant bytes that are not there) and clamped
    /// to the 24-bit field.
    pub fn grant_for(free_posted_bytes: u64) -> u32 {
        let units = free_posted_bytes / GRANT_UNIT;
        u32::try_from(units.min(u64::from(MAX_GRANT_UNITS))).unwrap_or(MAX_GRANT_UNITS)
    }

    /// Receiver side, rounded up: the smallest grant that covers `bytes` (clamped to the 24-bit
    /// field). For a receiver whose free space is small buffers: rounded down, a receive
    /// shorter than 4 KiB would be granted nothing and the SEND it is posted for could never
    /// be admitted. The overshoot (under one unit) admits bytes into the network, never into
    /// memory: placement takes no byte beyond a posted buffer.
    pub fn grant_covering(bytes: u64) -> u32 {
        let units = bytes.div_ceil(GRANT_UNIT);
        u32::try_from(units.min(u64::from(MAX_GRANT_UNITS))).unwrap_or(MAX_GRANT_UNITS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_to_bytes() {
        let mut a = ReceiverAdmission::new();
        assert_eq!(a.grant(), None);
        assert_eq!(a.allowed(1 << 40), u64::MAX - (1 << 40));
        a.on_grant(16);
        assert_eq!(a.grant(), Some(65_536));
        assert_eq!(a.allowed(0), 65_536);
        assert_eq!(a.allowed(60_000), 5536);
        assert_eq!(a.allowed(65_536), 0);
        assert_eq!(a.allowed(u64::MAX), 0);
        // A smaller grant replaces the larger one.
        a.on_grant(1);
        assert_eq!(a.window(), 4096);
        assert_eq!(a.allowed(10_000), 0);
    }

    #[test]
    fn grant_saturates_at_24_bits() {
        let mut a = ReceiverAdmission::new();
        a.on_grant(u32::MAX);
        assert_eq!(a.grant(), Some(u64::from(MAX_GRANT_UNITS) * 4096));
        a.on_grant(MAX_GRANT_UNITS);
        assert_eq!(a.grant(), Some(((1u64 << 24) - 1) * 4096));
    }

    #[test]
    fn closed_until_first_grant() {
        let mut a = ReceiverAdmission::closed();
        assert_eq!(a.allowed(0), 0);
        a.on_grant(0);
        assert_eq!(a.allowed(0), 0);
        a.on_grant(2);
        assert_eq!(a.allowed(100), 8092);
    }

    #[test]
    fn receiver_grant_covering_rounds_up() {
        assert_eq!(ReceiverAdmission::grant_covering(0), 0);
        assert_eq!(ReceiverAdmission::grant_covering(1), 1);
        assert_eq!(ReceiverAdmission::grant_covering(4096), 1);
        assert_eq!(ReceiverAdmission::grant_covering(4097), 2);
        assert_eq!(ReceiverAdmission::grant_covering(u64::MAX), MAX_GRANT_UNITS);
        for need in [1u64, 4095, 4096, 12_345, 1 << 30] {
            let bytes = ReceiverAdmission::units_to_bytes(ReceiverAdmission::grant_covering(need));
            assert!(bytes >= need && bytes < need + GRANT_UNIT);
        }
    }

    #[test]
    fn receiver_grant_for() {
        assert_eq!(ReceiverAdmission::grant_for(0), 0);
        assert_eq!(ReceiverAdmission::grant_for(4095), 0);
        assert_eq!(ReceiverAdmission::grant_for(4096), 1);
        assert_eq!(ReceiverAdmission::grant_for(4 << 20), 1024);
        assert_eq!(ReceiverAdmission::grant_for(u64::MAX), MAX_GRANT_UNITS);
        assert_eq!(
            ReceiverAdmission::grant_for(u64::from(MAX_GRANT_UNITS) * 4096 + 4095),
            MAX_GRANT_UNITS
        );
        // Round trip: the sender never gets more than the receiver has free.
        for free in [0u64, 1, 4096, 12_345, 1 << 30, 1 << 50] {
            let bytes = ReceiverAdmission::units_to_bytes(ReceiverAdmission::grant_for(free));
            assert!(bytes <= free);
        }
    }
}
