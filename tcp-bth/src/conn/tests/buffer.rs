//! A transmit buffer too short for the connection's segments: the connection ends with an
//! error the application sees, its work requests complete flushed with their buffers, instead
//! of a silent stall (it used to return `None` for ever, counting `tx_buffer_short`).

use super::*;
use crate::wire::ChecksumFill;

#[test]
fn a_buffer_shorter_than_a_segment_ends_the_connection_with_its_reason() {
    let mut d = established(true);
    d.a.post_recv(1, vec![0; 100]).unwrap();
    d.a.post_send(WorkRequest::send(2, pattern(2, 5000), None))
        .unwrap();
    let needed = d.a.max_segment_len();
    let mut short = vec![0u8; needed - 1];
    assert_eq!(
        d.a.poll_transmit_into(d.now, &mut short, ChecksumFill::Full),
        None
    );
    assert_eq!(d.a.stats().tx_buffer_short, 1);
    assert_eq!(
        d.a.error(),
        Some(ConnectionError::TransmitBufferShort {
            needed,
            buffer: needed - 1
        })
    );
    let c: Vec<_> = std::iter::from_fn(|| d.a.poll_completion()).collect();
    let got: Vec<_> = c
        .iter()
        .map(|c| (c.wr_id, c.status, c.buf.as_ref().map(Vec::len)))
        .collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::WrFlushError, Some(100)),
            (2, WcStatus::WrFlushError, None)
        ]
    );
    // A buffer of the right length afterwards builds nothing: the connection has ended, and
    // (with no buffer to build one in) it sent no RST.
    let mut v = vec![0u8; needed];
    assert_eq!(
        d.a.poll_transmit_into(d.now, &mut v, ChecksumFill::Full),
        None
    );
    assert_eq!(d.a.stats().bytes_sent, 0);
}

#[test]
fn a_buffer_of_exactly_the_longest_segment_is_enough() {
    let mut d = established(true);
    d.b.post_recv(1, vec![0; 100_000]).unwrap();
    d.settle(Duration::from_millis(10));
    d.a.post_send(WorkRequest::send(2, pattern(2, 100_000), None))
        .unwrap();
    let mut exact = vec![0u8; d.a.max_segment_len()];
    let n =
        d.a.poll_transmit_into(d.now, &mut exact, ChecksumFill::Full)
            .expect("a segment");
    assert!(n <= exact.len());
    assert!(d.a.error().is_none());
    assert_eq!(d.a.stats().tx_buffer_short, 0);
}
