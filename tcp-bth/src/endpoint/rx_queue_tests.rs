//! The receiving device's queue as a bound on what peers have in flight
//! ([`EndpointConfig::rx_queue`]): every packet A sends is held back until A has nothing more
//! to send, as a device queue holds what its reader has not taken yet; the data packets held
//! at once never exceed the receiver's share of its queue.

use super::tests::{conn_cfg, connect_many, endpoint};
use super::*;
use bth_framer::{WorkRequest, WrOp};

const A: [u8; 4] = [10, 1, 0, 1];
const B: [u8; 4] = [10, 1, 0, 2];
const PORT: u16 = 4791;
const MESSAGE: usize = 1 << 20;

/// `conns` connections from A to B (whose queue is `queue`), each sending one 1 MiB SEND at
/// once; returns the most data packets A had sent and B not yet read, at any moment.
fn most_held(queue: Option<RxQueue>, conns: usize) -> usize {
    let mut a = endpoint(1, |_| {});
    let mut b = endpoint(2, |c| c.rx_queue = queue);
    b.listen(PORT, conn_cfg(IpPair::V4 { src: B, dst: A }, 0))
        .expect("listen");
    let mut now = Duration::from_millis(1);
    let (hs, accepted) = connect_many(&mut now, &mut a, &mut b, conns);
    for &h in &accepted {
        b.conn_mut(h)
            .unwrap()
            .post_recv(1, vec![0; MESSAGE])
            .unwrap();
    }
    for &h in &hs {
        let wr = WorkRequest {
            wr_id: 1,
            op: WrOp::Send { imm: None },
            sg_list: vec![Bytes::from(vec![7u8; MESSAGE])],
        };
        a.conn_mut(h).unwrap().post_send(wr).expect("posted");
    }
    let (mut buf, mut held, mut most, mut done) = (Vec::new(), Vec::new(), 0, 0);
    for _ in 0..100_000 {
        while a.poll_transmit(now, &mut buf).is_some() {
            held.push(buf.clone());
        }
        let data = held
            .iter()
            .filter(|p| {
                let (_, tcp) = ip::parse(p).unwrap();
                !crate::wire::TcpRepr::parse(tcp, None)
                    .unwrap()
                    .payload
                    .is_empty()
            })
            .count();
        most = most.max(data);
        for p in held.drain(..) {
            b.handle(now, &p);
        }
        while b.poll_transmit(now, &mut buf).is_some() {
            a.handle(now, &buf);
        }
        for &h in &accepted {
            while let Some(c) = b.conn_mut(h).unwrap().poll_completion() {
                assert_eq!(c.byte_len as usize, MESSAGE);
                done += 1;
            }
        }
        if done == conns {
            return most;
        }
        if !a.has_output() && !b.has_output() {
            let next = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            now = next.unwrap_or(now).max(now);
            a.handle_timeout(now);
            b.handle_timeout(now);
        }
    }
    panic!("{done} of {conns} messages arrived");
}

#[test]
fn peers_never_have_more_in_flight_than_the_receivers_queue_holds() {
    let q = RxQueue {
        packets: 100,
        whole_super_segments: false,
    };
    // Three quarters of the queue, 75 packets, for one connection; 25 each for three.
    let one = most_held(Some(q), 1);
    assert!((60..=75).contains(&one), "one connection: {one}");
    let three = most_held(Some(q), 3);
    assert!(three <= 75, "three connections: {three}");
    // Without a queue to respect, the congestion window alone decides: 320 packets at once.
    let unbounded = most_held(None, 1);
    assert!(unbounded > 150, "no queue: {unbounded}");
}
