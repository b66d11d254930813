//! The unfilled bytes of posted buffers, which the stack's admission grant is built on: they
//! grow with each post, shrink as segments land (duplicates and out-of-order segments counted
//! once), and a buffer leaves the sum when it completes, is flushed or is cancelled.

mod common;

use bth_placement::{Placement, PlacementConfig};
use bth_wire::MessageKind;
use common::{only, seg};

const F: u16 = 0xFFFE; // crosses the MSN wrap

/// Whole units of the grid in the middle of a message take placement's short path: they count
/// as any other segment does.
#[test]
fn whole_units_count_once_on_the_short_path() {
    let mut p = Placement::new(PlacementConfig::new(F));
    p.post_recv(1, vec![0; 4000]).unwrap();
    let msg: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
    let part =
        |a: usize, b: usize| seg(MessageKind::Send, F, a as u32, &msg[a..b], 4000, None, None);
    // The first segment fixes the 1000-byte grid; the next three (one a duplicate) are whole
    // units; the last ends the message. Each step: the segment, then the unfilled bytes.
    let steps = [
        (0, 1000, 3000),
        (2000, 3000, 2000),
        (2000, 3000, 2000),
        (1000, 2000, 1000),
        (3000, 4000, 0),
    ];
    for (a, b, unfilled) in steps {
        p.place(&part(a, b));
        assert_eq!(p.unfilled_recv_bytes(), unfilled, "after [{a}, {b})");
    }
    assert_eq!(p.poll_completion().unwrap().buf.unwrap(), msg);
}

#[test]
fn receives_count_until_filled_and_completed() {
    let mut p = Placement::new(PlacementConfig::new(F));
    assert_eq!(p.unfilled_recv_bytes(), 0);
    p.post_recv(1, vec![0; 3000]).unwrap();
    p.post_recv(2, vec![0; 100]).unwrap();
    p.post_recv(3, Vec::new()).unwrap();
    // A zero-length receive admits the one pad byte of a zero-length SEND.
    assert_eq!(p.unfilled_recv_bytes(), 3101);
    let msg: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let part =
        |a: usize, b: usize| seg(MessageKind::Send, F, a as u32, &msg[a..b], 3000, None, None);
    // Out of order, then a duplicate: each byte counted once.
    p.place(&part(2000, 3000));
    assert_eq!(p.unfilled_recv_bytes(), 2101);
    p.place(&part(2000, 3000));
    assert_eq!(p.unfilled_recv_bytes(), 2101);
    p.place(&part(0, 2000));
    assert_eq!(p.unfilled_recv_bytes(), 101);
    // A SEND shorter than its buffer: the buffer leaves the sum when it completes.
    p.place(&only(
        MessageKind::Send,
        F.wrapping_add(1),
        b"short",
        None,
        None,
    ));
    assert_eq!(p.unfilled_recv_bytes(), 1);
    p.post_recv(4, vec![0; 500]).unwrap();
    p.flush();
    assert_eq!(p.unfilled_recv_bytes(), 0);
}

#[test]
fn read_sinks_count_until_filled_or_cancelled() {
    let mut p = Placement::new(PlacementConfig::new(F));
    p.expect_read_response(7, 1, vec![0; 4000]).unwrap();
    p.expect_read_response(8, 2, vec![0; 1000]).unwrap();
    assert_eq!(p.unfilled_read_bytes(), 5000);
    assert!(p.cancel_read(8).is_some());
    assert_eq!(p.unfilled_read_bytes(), 4000);
    let data = vec![9u8; 4000];
    let resp = |a: usize, b: usize| {
        seg(
            MessageKind::ReadResponse,
            7,
            a as u32,
            &data[a..b],
            4000,
            None,
            None,
        )
    };
    p.place(&resp(0, 1500));
    assert_eq!(p.unfilled_read_bytes(), 2500);
    p.place(&resp(1500, 4000));
    assert_eq!(p.unfilled_read_bytes(), 0);
    assert!(p.poll_completion().is_some());
    assert_eq!(p.unfilled_read_bytes(), 0);
    assert_eq!(p.unfilled_recv_bytes(), 0);
}
