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
}
