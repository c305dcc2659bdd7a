//! The `toolrouter` binary: everything happens in [`toolrouter::cli`].

fn main() -> std::process::ExitCode {
    toolrouter::cli::run()
}
