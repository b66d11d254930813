//! `Connection::peer_offered_bth`: whether the peer's SYN (or SYN-ACK) carried a tcp_bth
//! hello, whatever the handshake settled on. A listener without `Config::bth` settles on plain
//! TCP when a tcp_bth peer connects, and only this tells it that the peer wanted tcp_bth.

use super::super::passive::PeerSyn;
use super::*;

/// Every pairing of a connecting side and a listener, with and without tcp_bth: the listener
/// knows what the connecting side's SYN offered, the connecting side that its offer was taken.
#[test]
fn each_side_knows_whether_the_peer_offered_tcp_bth() {
    for (a_bth, b_bth) in [(true, true), (true, false), (false, true), (false, false)] {
        let (mut a, mut b) = configs(true);
        (a.bth, b.bth) = (a_bth, b_bth);
        let w = BackToBack::established(a, b, MS);
        let both = a_bth && b_bth;
        assert_eq!(matches!(w.a.mode(), Mode::Bth { .. }), both);
        assert_eq!(matches!(w.b.mode(), Mode::Bth { .. }), both);
        assert_eq!(w.b.peer_offered_bth(), a_bth, "listener, {a_bth} {b_bth}");
        assert_eq!(
            w.a.peer_offered_bth(),
            both,
            "connecting side, {a_bth} {b_bth}"
        );
    }
}

/// Before the peer's SYN or SYN-ACK nothing is known; a connection rebuilt from a SYN cookie
/// knows what the SYN offered as well as one accepted at once.
#[test]
fn a_syn_cookie_keeps_the_offer_and_nothing_is_known_before_it() {
    let (mut a, mut b) = configs(true);
    b.bth = false;
    let mut client = Connection::connect(a.clone(), MS);
    assert!(!client.peer_offered_bth(), "no SYN-ACK yet");
    let syn = client.poll_transmit(MS).expect("a SYN");
    let seg = TcpRepr::parse(&syn, Some(a.ip)).expect("the SYN parses");
    let peer = PeerSyn::of(&seg);
    assert!(peer.bth.is_some());
    let rebuilt = Connection::from_cookie(b.clone(), MS, seg.src_port, peer, 1234, 5, 6);
    assert!(rebuilt.peer_offered_bth());
    assert_eq!(rebuilt.mode(), Mode::Plain);
    // A plain SYN, through a cookie: no offer.
    a.bth = false;
    let mut plain = Connection::connect(a.clone(), MS);
    let syn = plain.poll_transmit(MS).expect("a SYN");
    let seg = TcpRepr::parse(&syn, Some(a.ip)).expect("the SYN parses");
    b.bth = true;
    let rebuilt = Connection::from_cookie(b, MS, seg.src_port, PeerSyn::of(&seg), 1234, 5, 6);
    assert!(!rebuilt.peer_offered_bth());
    assert_eq!(rebuilt.mode(), Mode::Plain);
}
