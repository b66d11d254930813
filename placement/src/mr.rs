//! Registered memory regions: what an RDMA WRITE may place into and an RDMA READ may read from.
//!
//! A region owns its bytes (a `Vec<u8>` handed over at registration and handed back at
//! deregistration), so once deregistered nothing in this crate can reach them any more.
//!
//! Addresses are a synthetic I/O virtual address space, not host pointers: exposing heap
//! addresses to a peer would leak the local memory layout, and a synthetic space lets every
//! region sit between unmapped guard gaps, so an address that is off by one past a region's end
//! never lands in the next region. Regions get page-aligned bases from a bump allocator that
//! starts at 4 GiB (so small integers such as 0 are never valid addresses) and never hands an
//! address out twice.

use std::collections::VecDeque;
use std::fmt;
use std::ops::{BitOr, BitOrAssign, Range};
use thiserror::Error;

/// Access rights of a region, combined with `|`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// No rights: only the owner can read the region (through [`MemoryRegions::bytes`]).
    pub const NONE: Access = Access(0);
    /// The local owner may write through [`MemoryRegions::write_local`].
    pub const LOCAL_WRITE: Access = Access(0x1);
    /// The peer may place RDMA WRITE payload into the region.
    pub const REMOTE_WRITE: Access = Access(0x2);
    /// The peer may read the region with RDMA READ.
    pub const REMOTE_READ: Access = Access(0x4);

    /// The rights as a bit mask (LOCAL_WRITE 0x1, REMOTE_WRITE 0x2, REMOTE_READ 0x4).
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every right in `other` is granted by `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// The rights of both `self` and `other` (what `|` computes, usable in `const`).
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        self.union(rhs)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Access) {
        *self = self.union(rhs);
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Access::LOCAL_WRITE, "LOCAL_WRITE"),
            (Access::REMOTE_WRITE, "REMOTE_WRITE"),
            (Access::REMOTE_READ, "REMOTE_READ"),
        ];
        let mut first = true;
        for (flag, name) in names {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("NONE")?;
        }
        Ok(())
    }
}

/// What the owner tells a peer about a region: rkey, the address of byte 0 and the length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MrHandle {
    /// Remote key the peer puts in a WRITE's RETH or a READ request to name the region.
    pub rkey: u32,
    /// Virtual address of byte 0 of the region.
    pub addr: u64,
    /// Length of the region in bytes (the registered buffer's length).
    pub len: u64,
    /// Rights the region was registered with.
    pub access: Access,
}

/// Why a region operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MrError {
    /// The rkey (given here) names no live region: never issued, or deregistered (a stale
    /// rkey of a re-used slot included).
    #[error("rkey {0:#010x} names no registered region")]
    UnknownRkey(u32),
    /// The region lacks a right the access needs (REMOTE_WRITE for a peer's WRITE,
    /// REMOTE_READ for its READ, LOCAL_WRITE for [`MemoryRegions::write_local`]).
    #[error("region {rkey:#010x} does not grant {needed}")]
    AccessDenied {
        /// The region's rkey.
        rkey: u32,
        /// The right that was missing.
        needed: Access,
    },
    /// The byte range, or part of it, lies outside the region (or its end overflows).
    #[error("[{addr:#x}, +{len}) is not inside region {rkey:#010x}")]
    OutOfBounds {
        /// The region's rkey.
        rkey: u32,
        /// Virtual address of the range's first byte.
        addr: u64,
        /// Length of the range in bytes.
        len: u64,
    },
    /// Registration asked for REMOTE_WRITE without LOCAL_WRITE.
    #[error("REMOTE_WRITE requires LOCAL_WRITE (as in verbs)")]
    RemoteWriteNeedsLocalWrite,
    /// Registration found all [`MAX_REGIONS`] slots in use.
    #[error("all {MAX_REGIONS} region slots are in use")]
    TooManyRegions,
    /// Registration found no room left for the region in the synthetic address space.
    #[error("the synthetic address space is exhausted")]
    AddressSpaceExhausted,
}

/// A refused registration: why, and the buffer, handed back.
#[derive(Clone, PartialEq, Eq, Error)]
#[error("{error}")]
pub struct MrRejected {
    /// Why the registration was refused.
    pub error: MrError,
    /// The buffer that was to be registered, unchanged.
    pub buf: Vec<u8>,
}

/// Prints the reason and the buffer's length, not its bytes.
impl fmt::Debug for MrRejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MrRejected")
            .field("error", &self.error)
            .field("buf_len", &self.buf.len())
            .finish()
    }
}

/// The rkey keeps the slot index in its upper 24 bits (stored +1 so rkey 0..=255 never names a
/// region), which caps the number of live regions.
pub const MAX_REGIONS: usize = (1 << 24) - 1;
/// First synthetic address handed out.
pub const IOVA_BASE: u64 = 1 << 32;
const PAGE: u64 = 4096;
/// Unmapped gap after every region.
const GUARD: u64 = PAGE;

struct Region {
    buf: Vec<u8>,
    addr: u64,
    access: Access,
}

struct Slot {
    /// Low 8 bits of the rkey; advanced on every registration of this slot so a stale rkey
    /// (deregistered, slot re-used) no longer matches.
    key: u8,
    region: Option<Region>,
}

/// The registry of memory regions of one connection (or protection domain).
pub struct MemoryRegions {
    slots: Vec<Slot>,
    /// Freed slots, re-used oldest first so a slot (and its 8-bit key) cycles as slowly as
    /// possible: a stale rkey can only alias after 256 re-registrations of the same slot.
    free: VecDeque<u32>,
    next_iova: u64,
    seed: u64,
    /// Odd, so repeated additions visit all 256 key values before repeating.
    key_stride: u8,
}

impl Default for MemoryRegions {
    fn default() -> Self {
        MemoryRegions::new()
    }
}

/// SplitMix64 finaliser: spreads a seed so neighbouring slots get unrelated initial keys.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl MemoryRegions {
    /// A registry with a fixed key seed: deterministic, fine for tests. Connections facing a
    /// real peer should use [`with_seed`](Self::with_seed) with a random seed (sans-IO: this
    /// crate has no entropy source of its own).
    pub fn new() -> MemoryRegions {
        MemoryRegions::with_seed(0)
    }

    /// `seed` picks each slot's first key and the key stride, so rkeys are not predictable
    /// from the slot index alone.
    pub fn with_seed(seed: u64) -> MemoryRegions {
        MemoryRegions {
            slots: Vec::new(),
            free: VecDeque::new(),
            next_iova: IOVA_BASE,
            seed,
            key_stride: (mix(seed) as u8) | 1,
        }
    }

    /// Number of registered regions.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether no region is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Take ownership of `buf` and make it addressable as `[addr, addr + len)` under a new rkey.
    /// On error the buffer comes back in the [`MrRejected`].
    pub fn register(&mut self, buf: Vec<u8>, access: Access) -> Result<MrHandle, MrRejected> {
        let (addr, next) = match self.plan(buf.len() as u64, access) {
            Ok(p) => p,
            Err(error) => return Err(MrRejected { error, buf }),
        };
        let index = match self.free.pop_front() {
            Some(i) => i as usize,
            None => {
                let i = self.slots.len();
                self.slots.push(Slot {
                    key: mix(self.seed ^ (i as u64).wrapping_mul(0x1_0000_0001)) as u8,
                    region: None,
                });
                i
            }
        };
        let stride = self.key_stride;
        let Some(slot) = self.slots.get_mut(index) else {
            let error = MrError::TooManyRegions;
            return Err(MrRejected { error, buf });
        };
        let len = buf.len() as u64;
        slot.key = slot.key.wrapping_add(stride);
        slot.region = Some(Region { buf, addr, access });
        self.next_iova = next;
        Ok(MrHandle {
            rkey: ((index as u32 + 1) << 8) | u32::from(slot.key),
            addr,
            len,
            access,
        })
    }

    /// Where a region of `len` bytes would go (`addr`, next free address), or why it cannot
    /// be registered; nothing changes here.
    fn plan(&self, len: u64, access: Access) -> Result<(u64, u64), MrError> {
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
            return Err(MrError::RemoteWriteNeedsLocalWrite);
        }
        let span = len
            .checked_add(PAGE - 1)
            .map(|l| l & !(PAGE - 1))
            .and_then(|l| l.checked_add(GUARD))
            .ok_or(MrError::AddressSpaceExhausted)?;
        let addr = self.next_iova;
        let next = addr
            .checked_add(span)
            .ok_or(MrError::AddressSpaceExhausted)?;
        if self.free.is_empty() && self.slots.len() >= MAX_REGIONS {
            return Err(MrError::TooManyRegions);
        }
        Ok((addr, next))
    }

    /// Remove the region and hand its memory back. The rkey is dead from now on.
    pub fn deregister(&mut self, rkey: u32) -> Result<Vec<u8>, MrError> {
        let index = self.slot_index(rkey)?;
        let region = self
            .slots
            .get_mut(index)
            .and_then(|s| s.region.take())
            .ok_or(MrError::UnknownRkey(rkey))?;
        self.free.push_back(index as u32);
        Ok(region.buf)
    }

    /// The handle of the live region `rkey`, or `None` when the rkey names none.
    pub fn get(&self, rkey: u32) -> Option<MrHandle> {
        self.region(rkey).ok().map(|r| MrHandle {
            rkey,
            addr: r.addr,
            len: r.buf.len() as u64,
            access: r.access,
        })
    }

    /// The bytes a peer's RDMA READ of `[addr, addr + len)` returns: needs REMOTE_READ and the
    /// whole range inside the region.
    pub fn read(&self, rkey: u32, addr: u64, len: u32) -> Result<&[u8], MrError> {
        let len = u64::from(len);
        let r = self.region(rkey)?;
        let range = Self::checked_range(r, rkey, Access::REMOTE_READ, addr, len)?;
        r.buf
            .get(range)
            .ok_or(MrError::OutOfBounds { rkey, addr, len })
    }

    /// Check that a peer may access `[addr, addr + len)` with `needed` rights, touching nothing.
    pub fn check_remote(
        &self,
        rkey: u32,
        addr: u64,
        len: u64,
        needed: Access,
    ) -> Result<(), MrError> {
        let r = self.region(rkey)?;
        Self::checked_range(r, rkey, needed, addr, len).map(|_| ())
    }

    /// The whole region, for its local owner (no rights needed to read one's own memory).
    pub fn bytes(&self, rkey: u32) -> Option<&[u8]> {
        self.region(rkey).ok().map(|r| r.buf.as_slice())
    }

    /// Local owner writes `data` at byte `offset` of the region; needs LOCAL_WRITE.
    pub fn write_local(&mut self, rkey: u32, offset: usize, data: &[u8]) -> Result<(), MrError> {
        let r = self.region_mut(rkey)?;
        if !r.access.contains(Access::LOCAL_WRITE) {
            return Err(MrError::AccessDenied {
                rkey,
                needed: Access::LOCAL_WRITE,
            });
        }
        let oob = MrError::OutOfBounds {
            rkey,
            addr: r.addr.saturating_add(offset as u64),
            len: data.len() as u64,
        };
        let end = offset.checked_add(data.len()).ok_or(oob)?;
        r.buf.get_mut(offset..end).ok_or(oob)?.copy_from_slice(data);
        Ok(())
    }

    /// Where a peer's RDMA WRITE of `len` bytes at `addr` lands, after the rights and bounds
    /// checks; nothing is written here.
    pub(crate) fn remote_write_target(
        &mut self,
        rkey: u32,
        addr: u64,
        len: u64,
    ) -> Result<&mut [u8], MrError> {
        let r = self.region_mut(rkey)?;
        let range = Self::checked_range(r, rkey, Access::REMOTE_WRITE, addr, len)?;
        r.buf
            .get_mut(range)
            .ok_or(MrError::OutOfBounds { rkey, addr, len })
    }

    fn checked_range(
        r: &Region,
        rkey: u32,
        needed: Access,
        addr: u64,
        len: u64,
    ) -> Result<Range<usize>, MrError> {
        if !r.access.contains(needed) {
            return Err(MrError::AccessDenied { rkey, needed });
        }
        let oob = MrError::OutOfBounds { rkey, addr, len };
        // Every step checked: a peer picks addr and len, and addr + len may wrap u64.
        let start = addr.checked_sub(r.addr).ok_or(oob)?;
        let end = start.checked_add(len).ok_or(oob)?;
        if end > r.buf.len() as u64 {
            return Err(oob);
        }
        let start = usize::try_from(start).map_err(|_| oob)?;
        let end = usize::try_from(end).map_err(|_| oob)?;
        Ok(start..end)
    }

    fn slot_index(&self, rkey: u32) -> Result<usize, MrError> {
        let index = (rkey >> 8) as usize;
        let slot = index
            .checked_sub(1)
            .and_then(|i| self.slots.get(i).map(|s| (i, s)));
        match slot {
            Some((i, s)) if s.key == rkey as u8 && s.region.is_some() => Ok(i),
            _ => Err(MrError::UnknownRkey(rkey)),
        }
    }

    fn region(&self, rkey: u32) -> Result<&Region, MrError> {
        let i = self.slot_index(rkey)?;
        self.slots
            .get(i)
            .and_then(|s| s.region.as_ref())
            .ok_or(MrError::UnknownRkey(rkey))
    }

    fn region_mut(&mut self, rkey: u32) -> Result<&mut Region, MrError> {
        let i = self.slot_index(rkey)?;
        self.slots
            .get_mut(i)
            .and_then(|s| s.region.as_mut())
            .ok_or(MrError::UnknownRkey(rkey))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

    #[test]
    fn stale_rkey_fails_after_reregistration() {
        let mut m = MemoryRegions::new();
        let a = m.register(vec![0; 10], RW).unwrap();
        assert_eq!(m.deregister(a.rkey).unwrap().len(), 10);
        let b = m.register(vec![0; 10], RW).unwrap();
        assert_eq!(a.rkey >> 8, b.rkey >> 8, "same slot re-used");
        assert_ne!(a.rkey, b.rkey);
        assert_eq!(m.get(a.rkey), None);
        assert_eq!(m.deregister(a.rkey), Err(MrError::UnknownRkey(a.rkey)));
        assert!(m.remote_write_target(a.rkey, b.addr, 1).is_err());
        assert!(m.remote_write_target(b.rkey, b.addr, 1).is_ok());
        assert_ne!(a.addr, b.addr, "addresses are never handed out twice");
    }

    #[test]
    fn keys_cycle_through_all_values_before_repeating() {
        let mut m = MemoryRegions::with_seed(42);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..256 {
            let h = m.register(vec![0; 1], RW).unwrap();
            assert!(seen.insert(h.rkey));
            m.deregister(h.rkey).unwrap();
        }
    }

    #[test]
    fn bounds_are_checked_with_overflowing_inputs() {
        let mut m = MemoryRegions::new();
        let h = m.register(vec![7; 100], RW | Access::REMOTE_READ).unwrap();
        assert_eq!(m.read(h.rkey, h.addr + 90, 10).unwrap(), &[7; 10]);
        for (addr, len) in [
            (h.addr + 91, 10),
            (h.addr - 1, 1),
            (h.addr, 101),
            (h.addr + 1, u32::MAX),
            (u64::MAX, 2),
            (0, 1),
            (h.addr + 100 + GUARD, 1),
        ] {
            assert!(
                matches!(m.read(h.rkey, addr, len), Err(MrError::OutOfBounds { .. })),
                "{addr:#x}+{len}"
            );
        }
        // addr + len wrapping u64 is refused, not wrapped into range.
        for addr in [h.addr, h.addr + 1, u64::MAX] {
            assert!(m
                .check_remote(h.rkey, addr, u64::MAX, Access::REMOTE_READ)
                .is_err());
        }
        assert!(m.write_local(h.rkey, usize::MAX, &[1]).is_err());
        assert!(m.write_local(h.rkey, 99, &[1, 2]).is_err());
        m.write_local(h.rkey, 99, &[1]).unwrap();
        assert_eq!(m.bytes(h.rkey).unwrap()[99], 1);
        assert!(m.bytes(h.rkey ^ 1).is_none());
    }

    #[test]
    fn rights_are_enforced() {
        let mut m = MemoryRegions::new();
        let refused = m
            .register(vec![1, 2, 3, 4], Access::REMOTE_WRITE)
            .unwrap_err();
        assert_eq!(refused.error, MrError::RemoteWriteNeedsLocalWrite);
        assert_eq!(refused.buf, vec![1, 2, 3, 4], "the buffer comes back");
        let ro = m.register(vec![0; 4], Access::REMOTE_READ).unwrap();
        assert!(matches!(
            m.remote_write_target(ro.rkey, ro.addr, 1),
            Err(MrError::AccessDenied { .. })
        ));
        assert!(m.write_local(ro.rkey, 0, &[1]).is_err());
        let wo = m.register(vec![0; 4], RW).unwrap();
        assert!(matches!(
            m.read(wo.rkey, wo.addr, 1),
            Err(MrError::AccessDenied { .. })
        ));
        assert_eq!(
            format!("{}", RW | Access::REMOTE_READ),
            "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ"
        );
        assert!(m.get(0).is_none() && m.get(u32::MAX).is_none());
    }
}
