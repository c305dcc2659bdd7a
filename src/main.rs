//! The `toolrouter` binary: everything happens in [`toolrouter::cli`].

/// jemalloc rather than glibc's allocator: a request allocates and frees
/// many small objects across two threads, and under load glibc's malloc
/// and free took a quarter of the server's CPU. jemalloc rather than
/// mimalloc: as fast here, with less memory held and a faster index load
/// (docs/benchmarks.md, "Proxy cost").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
