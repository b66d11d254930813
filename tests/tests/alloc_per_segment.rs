//! The per-segment paths allocate nothing per segment: a counting global allocator, switched
//! on only around each call of the connection under test, counts what building a data segment
//! (`poll_transmit_into`), placing one (`handle_segment` on the receiver), building an ACK and
//! taking one (`handle_segment` on the sender) allocate, over a bulk transfer of eight 1 MiB
//! SENDs in about 5,800 segments of 1,448 bytes. What the application does (posting, polling
//! completions) and the harness's own work are not counted. What they may allocate is per
//! message, not per segment: a message's arrival bitmap growing, its completion, the list of
//! messages an ACK released, a structure growing to its working size at the start. Each path
//! is held to at most eight allocations a message (64 here, against thousands of segments and
//! over a thousand ACKs), so one allocation per segment or per ACK anywhere fails the test.

use bth_framer::{WorkRequest, WrOp};
use bth_placement::WcStatus;
use bytes::Bytes;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;
use tcp_bth::pair::BackToBack;
use tcp_bth::wire::ChecksumFill;
use tcp_bth::{Config, Connection};

/// The system allocator, counting the allocations of the thread that asked for it.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the allocator may be called while the thread's locals are torn down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every call is passed to the system allocator unchanged; counting touches only
// const-initialised thread locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `f`'s result and the allocations it made on this thread.
fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCS.with(Cell::get);
    COUNTING.with(|on| on.set(true));
    let r = f();
    COUNTING.with(|on| on.set(false));
    (r, ALLOCS.with(Cell::get) - before)
}

/// Allocations on each per-segment path, and the segments each path handled.
#[derive(Debug, Default)]
struct Tally {
    data_segments: u64,
    build_data: u64,
    place_data: u64,
    acks: u64,
    build_ack: u64,
    take_ack: u64,
}

/// Everything `from` has to send, built into `buf` and handed to `to` at once: the segments,
/// and the allocations building them and taking them made.
fn deliver(from: &mut Connection, to: &mut Connection, now: Duration, buf: &mut [u8]) -> [u64; 3] {
    let [mut segments, mut built, mut taken] = [0; 3];
    loop {
        let (n, k) = counted(|| from.poll_transmit_into(now, buf, ChecksumFill::Full));
        built += k;
        let Some(n) = n else {
            return [segments, built, taken];
        };
        segments += 1;
        taken += counted(|| to.handle_segment(now, &buf[..n])).1;
    }
}

const MESSAGES: u64 = 8;
const LEN: usize = 1 << 20;

fn transfer() -> Tally {
    let ms = Duration::from_millis(1);
    let mut w = BackToBack::established(Config::default(), Config::default(), ms);
    for i in 0..MESSAGES {
        w.b.post_recv(i, vec![0; LEN]).expect("receive posted");
    }
    // The credit reaches A.
    w.settle(10 * ms);
    let msg = Bytes::from((0..LEN).map(|i| (i * 7 + 1) as u8).collect::<Vec<u8>>());
    for i in 0..MESSAGES {
        let wr = WorkRequest {
            wr_id: i,
            op: WrOp::Send { imm: None },
            sg_list: vec![msg.clone()],
        };
        w.a.post_send(wr).expect("send posted");
    }
    let len = w.a.max_segment_len().max(w.b.max_segment_len());
    let (mut data, mut ack) = (vec![0u8; len], vec![0u8; len]);
    let mut t = Tally::default();
    let (mut sent, mut received) = (0, 0);
    let mut now = w.now;
    for _ in 0..1_000_000 {
        let [segments, built, taken] = deliver(&mut w.a, &mut w.b, now, &mut data);
        t.data_segments += segments;
        t.build_data += built;
        t.place_data += taken;
        let [acks, built, taken] = deliver(&mut w.b, &mut w.a, now, &mut ack);
        t.acks += acks;
        t.build_ack += built;
        t.take_ack += taken;
        for c in [&mut w.a, &mut w.b] {
            if c.poll_timeout().is_some_and(|at| at <= now) {
                c.handle_timeout(now);
            }
        }
        while let Some(c) = w.a.poll_completion() {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
            sent += 1;
        }
        while let Some(c) = w.b.poll_completion() {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
            assert!(
                c.buf.as_deref() == Some(&msg[..]),
                "message {} intact",
                c.wr_id
            );
            received += 1;
        }
        if sent == MESSAGES && received == MESSAGES {
            return t;
        }
        now += Duration::from_micros(10);
    }
    panic!("{sent} sent and {received} received of {MESSAGES}: {t:?}");
}

#[test]
fn segments_and_acks_are_built_and_taken_without_allocating() {
    let t = transfer();
    println!("{t:?}");
    let want = MESSAGES * LEN as u64 / 1448;
    assert!(t.data_segments >= want, "{t:?}");
    // ACKs are built once a turn here, for all the segments the turn delivered, as over TUN.
    assert!(t.acks * 10 >= t.data_segments, "{t:?}");
    let most = 8 * MESSAGES;
    for (path, allocs) in [
        ("building data segments", t.build_data),
        ("placing data segments", t.place_data),
        ("building ACKs", t.build_ack),
        ("taking ACKs", t.take_ack),
    ] {
        assert!(
            allocs <= most,
            "{path}: {allocs} allocations for {MESSAGES} messages: {t:?}"
        );
    }
}
