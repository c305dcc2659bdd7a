//! The `toolrouter` binary: everything happens in [`toolrouter::cli`].

fn main() -> std::process::ExitCode {
    // Rust ignores SIGPIPE, so printing to a closed pipe (`toolrouter … |
    // head`) would panic. Command-line tools should end quietly instead:
    // restore the default action. Sockets are unaffected (Rust and tokio
    // send with MSG_NOSIGNAL).
    // SAFETY: called first thing in main, before any thread is started.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    toolrouter::cli::run()
}
