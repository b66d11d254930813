//! Property tests: arbitrary event sequences never break the window invariants.

use core::time::Duration;

use proptest::prelude::*;

use crate::{Algorithm, CongestionControl, Cubic, ReceiverAdmission, MAX_GRANT_UNITS};

#[derive(Clone, Debug)]
enum Ev {
    Ack {
        acked: u64,
        rtt: Option<Duration>,
        flight: u64,
    },
    Loss {
        flight: u64,
    },
    RecoveryEnd,
    Rto,
    Spurious,
    /// Move the clock: forward, not at all, or backwards.
    Time(i64),
}

fn bytes() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..100_000,
        2 => 0u64..100_000_000,
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ]
}

fn rtt() -> impl Strategy<Value = Option<Duration>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(Duration::ZERO)),
        4 => (0u64..2_000_000_000).prop_map(|n| Some(Duration::from_nanos(n))),
        1 => Just(Some(Duration::MAX)),
    ]
}

fn event() -> impl Strategy<Value = Ev> {
    prop_oneof![
        8 => (bytes(), rtt(), bytes()).prop_map(|(acked, rtt, flight)| Ev::Ack { acked, rtt, flight }),
        2 => bytes().prop_map(|flight| Ev::Loss { flight }),
        1 => Just(Ev::RecoveryEnd),
        1 => Just(Ev::Rto),
        1 => Just(Ev::Spurious),
        3 => prop_oneof![
            Just(0i64),
            -5_000_000_000i64..0,
            0i64..60_000_000_000,
            Just(i64::MAX),
        ]
        .prop_map(Ev::Time),
    ]
}

fn mss() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(536),
        Just(1448),
        Just(1460),
        Just(9000),
        1u32..70_000,
        Just(u32::MAX),
    ]
}

fn shift(now: Duration, d: i64) -> Duration {
    if d >= 0 {
        now.saturating_add(Duration::from_nanos(d.unsigned_abs()))
    } else {
        now.saturating_sub(Duration::from_nanos(d.unsigned_abs()))
    }
}

/// Apply `ev` and check the invariants; `now` is the caller's clock.
fn step(cc: &mut dyn CongestionControl, now: &mut Duration, ev: &Ev) -> Result<(), TestCaseError> {
    let mss = cc.mss();
    let before = cc.cwnd();
    match *ev {
        Ev::Ack { acked, rtt, flight } => {
            cc.on_ack(*now, acked, rtt, flight);
            prop_assert!(
                cc.cwnd() >= before,
                "an ACK shrank cwnd {} -> {}",
                before,
                cc.cwnd()
            );
        }
        Ev::Loss { flight } => {
            cc.on_congestion_event(*now, flight);
            prop_assert!(cc.cwnd() <= before.max(2 * mss));
            prop_assert!(cc.cwnd() >= before.min(2 * mss));
            prop_assert!(cc.in_recovery());
        }
        Ev::RecoveryEnd => {
            cc.on_recovery_end(*now);
            prop_assert!(!cc.in_recovery());
        }
        Ev::Rto => {
            cc.on_rto(*now);
            prop_assert_eq!(cc.cwnd(), mss);
            prop_assert!(cc.in_slow_start());
        }
        Ev::Spurious => cc.on_spurious_congestion(),
        Ev::Time(d) => *now = shift(*now, d),
    }
    prop_assert!(mss >= 1);
    prop_assert!(cc.cwnd() >= mss, "cwnd {} < mss {}", cc.cwnd(), mss);
    prop_assert!(
        cc.ssthresh() >= 2 * mss,
        "ssthresh {} < 2*mss {}",
        cc.ssthresh(),
        2 * mss
    );
    prop_assert_eq!(cc.in_slow_start(), cc.cwnd() < cc.ssthresh());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn window_invariants(
        alg in prop_oneof![Just(Algorithm::NewReno), Just(Algorithm::Cubic)],
        mss in mss(),
        start in 0u64..1_000_000_000_000,
        events in proptest::collection::vec(event(), 0..200),
    ) {
        let mut cc = alg.build(mss);
        let mut now = Duration::from_nanos(start);
        for ev in &events {
            step(cc.as_mut(), &mut now, ev)?;
        }
    }

    #[test]
    fn cubic_state_stays_finite(
        mss in mss(),
        fast in any::<bool>(),
        events in proptest::collection::vec(event(), 0..200),
    ) {
        let mut cc = Cubic::new(mss).with_fast_convergence(fast);
        let mut now = Duration::ZERO;
        for ev in &events {
            step(&mut cc, &mut now, ev)?;
            let k = cc.k();
            prop_assert!(k.is_finite() && k >= 0.0, "K = {}", k);
            let _ = cc.w_cubic(Duration::MAX);
            let _ = cc.w_cubic(Duration::ZERO);
        }
    }

    /// A window-limited sender with realistic ACKs: the same invariants, and the window does
    /// grow when nothing is lost.
    #[test]
    fn realistic_acks_grow(
        alg in prop_oneof![Just(Algorithm::NewReno), Just(Algorithm::Cubic)],
        rtt_us in 0u64..500_000,
        seg in 1u64..=2,
        losses in proptest::collection::vec(any::<bool>(), 1..30),
    ) {
        let mss = 1448u64;
        let mut cc = alg.build(mss as u32);
        let rtt = Duration::from_micros(rtt_us);
        let mut now = Duration::ZERO;
        for lost in losses {
            let w0 = cc.cwnd();
            if lost {
                step(cc.as_mut(), &mut now, &Ev::Loss { flight: w0 })?;
                step(cc.as_mut(), &mut now, &Ev::RecoveryEnd)?;
            }
            let w1 = cc.cwnd();
            let n = w1.div_ceil(seg * mss);
            for i in 0..n {
                now += rtt / (n as u32);
                let acked = (seg * mss).min(w1 - i * seg * mss);
                let flight = cc.cwnd().saturating_sub(acked);
                step(cc.as_mut(), &mut now, &Ev::Ack { acked, rtt: Some(rtt), flight })?;
            }
            prop_assert!(cc.cwnd() > w1 || cc.cwnd() == u64::MAX);
        }
    }

    #[test]
    fn admission(units in any::<u32>(), flight in any::<u64>(), free in any::<u64>()) {
        let mut a = ReceiverAdmission::new();
        a.on_grant(units);
        let g = a.grant().unwrap();
        prop_assert!(g <= u64::from(MAX_GRANT_UNITS) * 4096);
        prop_assert!(a.allowed(flight) <= g);
        prop_assert_eq!(a.allowed(flight), g.saturating_sub(flight));
        let units = ReceiverAdmission::grant_for(free);
        prop_assert!(units <= MAX_GRANT_UNITS);
        prop_assert!(ReceiverAdmission::units_to_bytes(units) <= free);
        prop_assert!(free.min(u64::from(MAX_GRANT_UNITS) * 4096) - ReceiverAdmission::units_to_bytes(units) < 4096);
    }
}
