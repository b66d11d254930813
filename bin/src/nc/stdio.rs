//! stdin and stdout beside the driver's turn loop: a thread reads the input into a bounded
//! queue ([`Reader`], the pump's [`Source`]), another writes what the pump hands it
//! ([`Writer`], its [`Sink`]). Each wakes the driver when it has made progress (new input,
//! room again), so the loop never waits for them and they never wait for a turn.

use super::pump::{Input, Refused, Sink, Source, MSG_MAX};
use std::io::{self, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Ends the driver's wait early (`bth_io::turn::PacketIo::waker`); `None`: the loop notices
/// at its next turn anyway.
pub type Wake = Option<Arc<dyn Fn() + Send + Sync>>;

/// Chunks queued between a thread and the pump, each way: 16 of up to 64 KiB.
const QUEUE: usize = 16;

fn wake(w: &Wake) {
    if let Some(w) = w {
        w();
    }
}

/// The input, read by a thread of its own.
pub struct Reader {
    rx: Receiver<Input>,
    ended: bool,
}

impl Reader {
    /// Start a thread reading `input` in chunks of up to 64 KiB until its end or an error.
    pub fn spawn(mut input: impl Read + Send + 'static, wake_up: Wake) -> io::Result<Reader> {
        let (tx, rx) = sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("bth-nc-stdin".into())
            .spawn(move || loop {
                let mut buf = vec![0u8; MSG_MAX];
                let item = match input.read(&mut buf) {
                    Ok(0) => Input::Eof,
                    Ok(n) => {
                        buf.truncate(n);
                        Input::Data(buf)
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => Input::Failed(e),
                };
                let last = !matches!(item, Input::Data(_));
                // Blocks while the queue is full: the pump takes no more than the connection
                // has room for, and so neither does this thread.
                if tx.send(item).is_err() {
                    return;
                }
                wake(&wake_up);
                if last {
                    return;
                }
            })?;
        Ok(Reader { rx, ended: false })
    }
}

impl Source for Reader {
    fn poll(&mut self) -> Input {
        if self.ended {
            return Input::Eof;
        }
        match self.rx.try_recv() {
            Ok(Input::Eof) | Err(TryRecvError::Disconnected) => {
                self.ended = true;
                Input::Eof
            }
            Ok(i) => i,
            Err(TryRecvError::Empty) => Input::Pending,
        }
    }
}

/// The output, written by a thread of its own.
pub struct Writer {
    tx: SyncSender<Vec<u8>>,
    thread: JoinHandle<io::Result<u64>>,
}

impl Writer {
    /// Start a thread writing every chunk it is handed to `output`, in order.
    pub fn spawn(mut output: impl Write + Send + 'static, wake_up: Wake) -> io::Result<Writer> {
        let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
        let thread = std::thread::Builder::new()
            .name("bth-nc-stdout".into())
            .spawn(move || {
                let mut written = 0u64;
                for chunk in rx {
                    output.write_all(&chunk)?;
                    written += chunk.len() as u64;
                    // Room in the queue again.
                    wake(&wake_up);
                }
                output.flush()?;
                Ok(written)
            })?;
        Ok(Writer { tx, thread })
    }

    /// Let the thread write what it was handed and end: the bytes written, or why writing
    /// failed.
    pub fn finish(self) -> io::Result<u64> {
        drop(self.tx);
        self.thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the stdout thread panicked")))
    }
}

impl Sink for Writer {
    fn offer(&mut self, bytes: Vec<u8>) -> Result<(), Refused> {
        match self.tx.try_send(bytes) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(b)) => Err(Refused::Full(b)),
            Err(TrySendError::Disconnected(_)) => Err(Refused::Closed),
        }
    }
}
