//! `poll_event` reports each change once, in order: connected (with the negotiated mode), the
//! peer's FIN, closed (with the terminal reason, or none after an orderly close).

use super::*;

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

#[test]
fn orderly_life_in_both_modes() {
    for bth in [true, false] {
        let mut d = established(bth);
        let mode = d.a.mode();
        assert_eq!(mode == Mode::Plain, !bth);
        assert_eq!(events(&mut d.a), vec![Event::Connected { mode }]);
        assert_eq!(events(&mut d.b), vec![Event::Connected { mode }]);
        d.a.close();
        d.run(Duration::from_secs(1), pass, |d| {
            d.b.state() == State::CloseWait
        });
        assert_eq!(events(&mut d.b), vec![Event::PeerFinished]);
        d.b.close();
        let a_cfg_time_wait = d.a.config().time_wait;
        d.run(a_cfg_time_wait * 2, pass, |d| {
            d.a.is_closed() && d.b.is_closed()
        });
        assert_eq!(
            events(&mut d.a),
            vec![Event::PeerFinished, Event::Closed { error: None }]
        );
        assert_eq!(events(&mut d.b), vec![Event::Closed { error: None }]);
        assert_eq!(d.a.poll_event(), None, "each change reported once");
    }
}

#[test]
fn reset_is_reported_with_its_reason() {
    let mut d = established(true);
    events(&mut d.a);
    events(&mut d.b);
    d.a.abort();
    assert_eq!(
        events(&mut d.a),
        vec![Event::Closed {
            error: Some(ConnectionError::LocallyAborted)
        }]
    );
    d.settle(Duration::from_millis(10));
    assert_eq!(
        events(&mut d.b),
        vec![Event::Closed {
            error: Some(ConnectionError::Reset)
        }]
    );
}
