//! The simulated backend's control socket: a Unix socket served by one std
//! thread, reading fault commands a line at a time and answering each with `ok`
//! or `error: REASON`. A stale socket file is replaced at start; the socket is
//! removed when the server is dropped (if it is still ours).

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::gpu::error::GpuError;
use crate::gpu::fault_command::MAX_COMMAND_LEN;

/// How long the server waits on a client's read or write before hanging up.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// The most commands served on one connection.
const MAX_COMMANDS_PER_CONNECTION: usize = 64;

/// Pause after a failed `accept` (e.g. out of file descriptors), so the thread
/// does not spin.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// Answers one command line: `Ok` is sent as `ok`, `Err(reason)` as
/// `error: reason`.
pub type Handler = dyn Fn(&str) -> Result<(), String> + Send + Sync;

/// A running control socket.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    /// (device, inode) of the socket file this server created.
    identity: (u64, u64),
    shutdown: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `path` (replacing a stale socket file there) and serves commands
    /// with `handler` on a dedicated thread.
    pub fn start(path: PathBuf, handler: Arc<Handler>) -> Result<Self, GpuError> {
        let socket_error = |source: io::Error| GpuError::ControlSocket {
            path: path.clone(),
            source,
        };
        remove_stale_socket(&path).map_err(socket_error)?;
        let listener = UnixListener::bind(&path).map_err(socket_error)?;
        let metadata = fs::metadata(&path).map_err(socket_error)?;
        let shutdown = Arc::new(AtomicBool::new(false));
        let thread = thread::Builder::new()
            .name("gpu-control".to_string())
            .spawn({
                let shutdown = Arc::clone(&shutdown);
                move || accept_loop(&listener, &*handler, &shutdown)
            })
            .map_err(socket_error)?;
        Ok(Self {
            identity: (metadata.dev(), metadata.ino()),
            path,
            shutdown,
            thread: Some(thread),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        // Wake the blocked `accept`; if nobody can connect, the thread cannot be
        // woken, so it is left to end with the process rather than joined.
        let woken = UnixStream::connect(&self.path).is_ok();
        if let Some(thread) = self.thread.take()
            && woken
            && thread.join().is_err()
        {
            tracing::warn!("the GPU control socket thread panicked");
        }
        let ours = fs::metadata(&self.path)
            .map(|m| (m.dev(), m.ino()) == self.identity)
            .unwrap_or(false);
        if ours && let Err(error) = fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), %error, "could not remove the GPU control socket");
        }
    }
}

/// Removes a socket file nobody listens on. A live socket (another agent) or a
/// file that is not a socket is left alone and reported.
fn remove_stale_socket(path: &Path) -> io::Result<()> {
    let metadata = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    if !metadata.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a file that is not a socket is in the way; remove it",
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another agent is listening there; stop it or give this agent its own directory",
        )),
        Err(_) => fs::remove_file(path),
    }
}

fn accept_loop(listener: &UnixListener, handler: &Handler, shutdown: &AtomicBool) {
    for stream in listener.incoming() {
        if shutdown.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(stream) => {
                if let Err(error) = serve(stream, handler, shutdown) {
                    tracing::debug!(%error, "GPU control connection ended with an error");
                }
            }
            Err(error) => {
                tracing::warn!(%error, "accepting on the GPU control socket failed");
                thread::sleep(ACCEPT_ERROR_BACKOFF);
            }
        }
    }
}

/// Serves one connection: a command per line, an answer per command.
fn serve(stream: UnixStream, handler: &Handler, shutdown: &AtomicBool) -> io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let line_limit = u64::try_from(MAX_COMMAND_LEN + 1).unwrap_or(u64::MAX);
    for _ in 0..MAX_COMMANDS_PER_CONNECTION {
        if shutdown.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut line = Vec::new();
        let read = (&mut reader)
            .take(line_limit)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(());
        }
        let complete = line.ends_with(b"\n");
        if !complete && line.len() > MAX_COMMAND_LEN {
            writeln!(writer, "error: command longer than {MAX_COMMAND_LEN} bytes")?;
            return Ok(());
        }
        let answer = match std::str::from_utf8(&line) {
            Ok(text) => handler(text.trim()),
            Err(_) => Err("the command is not UTF-8 text".to_string()),
        };
        match answer {
            Ok(()) => writeln!(writer, "ok")?,
            Err(reason) => writeln!(writer, "error: {}", reason.replace('\n', " "))?,
        }
    }
    Ok(())
}
