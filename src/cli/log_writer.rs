//! The server's log writer: lines are appended to a buffer in memory and
//! a thread of its own writes the buffer to stderr every
//! [`FLUSH_EVERY`], in one `write` however many lines it holds.
//!
//! A server logs a line per request. Written at once, each line is a
//! system call on the request's path; handed to a writer thread per line
//! (`tracing-appender`'s non-blocking writer), each line wakes that
//! thread, a context switch per request: 45 µs of CPU per request at
//! 1,000 requests/s on the 2-core machine of docs/benchmarks.md. Batching
//! by time costs a request a lock and a copy, and a line shows up at most
//! [`FLUSH_EVERY`] late. Lines beyond [`MAX_BUFFERED`] bytes waiting (a
//! stderr that stopped draining) are dropped, not waited for, and counted
//! in `/metrics`; dropping the [`Guard`] writes what is left.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How often the buffer is written out.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// Bytes of log lines held at most before new lines are dropped.
const MAX_BUFFERED: usize = 8 << 20;

struct Shared {
    buffer: Mutex<Buffer>,
    /// Wakes the writer thread early: to finish.
    wake: Condvar,
    dropped: Arc<AtomicU64>,
}

#[derive(Default)]
struct Buffer {
    bytes: Vec<u8>,
    closing: bool,
}

/// Where a server's log lines go (a `MakeWriter` for tracing-subscriber).
#[derive(Clone)]
pub(crate) struct LogWriter {
    shared: Arc<Shared>,
}

/// Writes what is buffered and stops the writer thread when dropped.
pub(crate) struct Guard {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A writer to `out` (stderr in the server) and its guard.
pub(crate) fn batched(mut out: impl Write + Send + 'static) -> (LogWriter, Guard) {
    let shared = Arc::new(Shared { buffer: Mutex::default(), wake: Condvar::new(), dropped: Arc::default() });
    let writer_side = shared.clone();
    let thread = std::thread::Builder::new()
        .name("log-writer".into())
        .spawn(move || {
            let mut spare = Vec::new();
            loop {
                let mut buffer = writer_side.buffer.lock().unwrap_or_else(|e| e.into_inner());
                if !buffer.closing {
                    buffer = writer_side.wake.wait_timeout(buffer, FLUSH_EVERY).unwrap_or_else(|e| e.into_inner()).0;
                }
                let closing = buffer.closing;
                std::mem::swap(&mut buffer.bytes, &mut spare);
                drop(buffer);
                if !spare.is_empty() {
                    // Nowhere to report a failing stderr: the lines are lost.
                    let _ = out.write_all(&spare).and_then(|()| out.flush());
                    spare.clear();
                }
                if closing {
                    return;
                }
            }
        })
        .ok();
    (LogWriter { shared: shared.clone() }, Guard { shared, thread })
}

impl LogWriter {
    /// Lines dropped so far because too much was waiting.
    pub(crate) fn dropped(&self) -> Arc<AtomicU64> {
        self.shared.dropped.clone()
    }
}

impl Write for LogWriter {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let mut buffer = self.shared.buffer.lock().unwrap_or_else(|e| e.into_inner());
        if buffer.bytes.len() + line.len() > MAX_BUFFERED {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        } else {
            buffer.bytes.extend_from_slice(line);
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        self.clone()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.shared.buffer.lock().unwrap_or_else(|e| e.into_inner()).closing = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Write` whose bytes the test can read.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_arrive_in_order_within_a_flush_and_all_of_them_on_drop() {
        let sink = Sink::default();
        let (mut writer, guard) = batched(sink.clone());
        writer.write_all(b"one\n").unwrap();
        writer.write_all(b"two\n").unwrap();
        let waited = std::time::Instant::now();
        while sink.0.lock().unwrap().is_empty() && waited.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(&*sink.0.lock().unwrap(), b"one\ntwo\n");
        writer.write_all(b"three\n").unwrap();
        drop(guard);
        assert_eq!(&*sink.0.lock().unwrap(), b"one\ntwo\nthree\n", "the guard writes what is left");
        assert_eq!(writer.dropped().load(Ordering::Relaxed), 0);
    }

    #[test]
    fn lines_past_the_cap_are_dropped_and_counted() {
        let (mut writer, guard) = batched(std::io::sink());
        // The writer thread may flush meanwhile: push well past the cap.
        let line = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            writer.write_all(&line).unwrap();
        }
        drop(guard);
        assert!(writer.dropped().load(Ordering::Relaxed) > 0);
    }
}
