//! The `toolrouter` binary: everything happens in [`toolrouter::cli`].

/// jemalloc rather than glibc's allocator: a request allocates and frees
/// many small objects across two threads, and under load glibc's malloc
/// and free took a quarter of the server's CPU. jemalloc rather than
/// mimalloc: as fast here, with less memory held and a faster index load
/// (docs/benchmarks.md, "Proxy cost").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    toolrouter::cli::run()
}
