//! Threads that set something up (a TUN device in a namespace, a relay) before the caller goes
//! on: the caller waits until the set-up has succeeded, and the thread then runs with what it
//! made, or has failed, and the caller gets the set-up's error.

use std::io;
use std::thread::JoinHandle;

/// Spawn thread `name` to run `set_up`, then `run` with what it made. Returns once `set_up` is
/// done: the thread's handle, or `set_up`'s error (the thread has then ended).
pub fn spawn_set_up<T, R: Send + 'static>(
    name: &str,
    set_up: impl FnOnce() -> io::Result<T> + Send + 'static,
    run: impl FnOnce(T) -> io::Result<R> + Send + 'static,
) -> io::Result<JoinHandle<io::Result<R>>> {
    let (ready, is_ready) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::Builder::new().name(name.into());
    let h = thread.spawn(move || {
        let made = set_up()?;
        let _ = ready.send(());
        run(made)
    })?;
    if is_ready.recv().is_ok() {
        return Ok(h);
    }
    // The sender went away without a word: the set-up failed (or panicked).
    match h.join() {
        Ok(Err(e)) => Err(e),
        Ok(Ok(_)) => Err(io::Error::other(format!(
            "thread {name} ended without setting up"
        ))),
        Err(_) => Err(io::Error::other(format!(
            "thread {name} panicked setting up"
        ))),
    }
}

/// Join the two threads of a run, `a` (a server, a receiver) and `b` (its client, its
/// sender), each named for the errors: both results, or the error of the one that failed, with
/// its name (a panic becomes an error too). When both failed, `a`'s comes first and `b`'s
/// follows it: a server's refusal usually shows at its client only as a reset.
pub fn join_both<A, B>(
    (a, a_name): (JoinHandle<io::Result<A>>, &str),
    (b, b_name): (JoinHandle<io::Result<B>>, &str),
) -> io::Result<(A, B)> {
    let named = |name: &str, e: io::Error| io::Error::new(e.kind(), format!("{name}: {e}"));
    let panicked = |name: &str| io::Error::other(format!("{name} thread panicked"));
    let b = b.join().map_err(|_| panicked(b_name)).and_then(|r| r);
    let a = a.join().map_err(|_| panicked(a_name)).and_then(|r| r);
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(ae), Err(be)) => Err(io::Error::new(
            ae.kind(),
            format!("{a_name}: {ae} ({b_name}: {be})"),
        )),
        (Err(e), _) => Err(named(a_name, e)),
        (_, Err(e)) => Err(named(b_name, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_gets_the_thread_or_the_set_up_error() {
        let h = spawn_set_up("t-ok", || Ok(20), |x| Ok(x + 1)).expect("set up");
        assert_eq!(h.join().unwrap().unwrap(), 21);
        let e = spawn_set_up(
            "t-err",
            || Err::<u8, _>(io::Error::new(io::ErrorKind::NotFound, "no device")),
            |_| Ok(()),
        )
        .expect_err("set-up fails");
        assert_eq!(
            (e.kind(), e.to_string()),
            (io::ErrorKind::NotFound, "no device".into())
        );
        let e = spawn_set_up(
            "t-panic",
            || -> io::Result<u8> { panic!("boom") },
            |_| Ok(()),
        )
        .expect_err("set-up panics");
        assert!(e.to_string().contains("t-panic panicked"), "{e}");
    }

    #[test]
    fn both_sides_are_joined_and_a_failure_is_named() {
        let ok = |v: u8| std::thread::spawn(move || -> io::Result<u8> { Ok(v) });
        let err = |m: &'static str| {
            std::thread::spawn(move || -> io::Result<u8> { Err(io::Error::other(m)) })
        };
        assert_eq!(
            join_both((ok(1), "server"), (ok(2), "client")).unwrap(),
            (1, 2)
        );
        let e = join_both((ok(1), "server"), (err("reset"), "client")).unwrap_err();
        assert_eq!(e.to_string(), "client: reset");
        let e = join_both((err("refused"), "server"), (err("reset"), "client")).unwrap_err();
        assert_eq!(e.to_string(), "server: refused (client: reset)");
        let boom = std::thread::spawn(|| -> io::Result<u8> { panic!("boom") });
        let e = join_both((boom, "receiver"), (ok(2), "sender")).unwrap_err();
        assert_eq!(e.to_string(), "receiver: receiver thread panicked");
    }
}
