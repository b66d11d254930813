//! Plain mode is a byte stream: small `send_bytes` calls are coalesced into full segments (they
//! used to go out one segment per call, 100 × 10 bytes as 100 segments).

use super::*;

fn data_segments_sent(bth: bool, calls: usize, each: usize) -> (u64, Vec<u8>) {
    let mut d = established(bth);
    let mut expect = Vec::new();
    for i in 0..calls {
        let chunk = pattern(i as u8, each);
        d.a.send_bytes(&chunk).unwrap();
        expect.extend_from_slice(&chunk);
    }
    let mut data_segments = 0u64;
    let count = |dir: Direction, _: Duration, p: Vec<u8>| {
        if dir == Direction::AtoB {
            let seg = TcpRepr::parse(&p, None).unwrap();
            data_segments += u64::from(!seg.payload.is_empty());
        }
        Some(p)
    };
    let mut got = Vec::new();
    let ok = d.run(Duration::from_secs(2), count, |d| {
        drain(&mut d.b, &mut got);
        got.len() == expect.len()
    });
    assert!(ok, "{} of {} bytes", got.len(), expect.len());
    assert_eq!(got, expect);
    (data_segments, got)
}

#[test]
fn hundred_small_writes_go_out_as_one_segment() {
    let (segments, _) = data_segments_sent(false, 100, 10);
    assert_eq!(segments, 1, "1000 bytes fit one segment");
}

#[test]
fn writes_straddling_segments_fill_each_segment() {
    // 50 × 1000 bytes = 50,000 bytes; full segments carry payload_mss bytes each.
    let (segments, _) = data_segments_sent(false, 50, 1000);
    let d = established(false);
    let per = u64::from(d.a.payload_mss());
    assert_eq!(segments, 50_000u64.div_ceil(per), "{per}-byte segments");
}
