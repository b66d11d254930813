//! The incast target of issue #12, on the default scenario (16 senders, 512 KiB drop-tail
//! queue, 24 KiB admitted per sender): with admission no packet is dropped at the bottleneck
//! and the p99 message completion time is lower than without. These are results of the
//! deterministic simulation (virtual time), not of the machine running the test.

use super::*;

fn check(op: IncastOp) -> [IncastReport; 2] {
    let cfg = IncastConfig {
        op,
        ..IncastConfig::default()
    };
    let [off, on] = compare(&cfg).unwrap_or_else(|e| panic!("{op:?}: {e}"));
    let t = table(&[off.clone(), on.clone()]);
    assert_eq!(on.queue_drops, 0, "{op:?} with admission:\n{t}");
    assert!(off.queue_drops > 0, "{op:?} without admission:\n{t}");
    assert!(on.p99 < off.p99, "{op:?}:\n{t}");
    assert!(on.grant_holds > 0 && off.grant_holds == 0, "{t}");
    [off, on]
}

/// RDMA WRITE with immediate: only the grant bounds what each sender puts in flight.
#[test]
fn incast_of_writes_drops_nothing_with_admission_and_has_a_lower_p99() {
    let [_, on] = check(IncastOp::WriteImm);
    assert_eq!(on.retransmits, 0);
}

/// SEND into receives posted two deep: credit alone lets each sender have 128 KiB in flight
/// (2 MiB together, four times the queue); the receiver's cap on its grant is what bounds it.
#[test]
fn incast_of_sends_drops_nothing_with_admission_and_has_a_lower_p99() {
    check(IncastOp::Send);
}

/// The same config gives the same report, figure for figure.
#[test]
fn incast_is_deterministic() {
    let cfg = IncastConfig {
        senders: 4,
        messages: 8,
        admission: false,
        ..IncastConfig::default()
    };
    let a = run(&cfg).unwrap();
    assert_eq!(a, run(&cfg).unwrap());
}
