//! `toolrouter serve` (HTTP: the MCP face at /mcp, health), `toolrouter
//! mcp` (the MCP face over stdio) and `toolrouter key hash`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use rmcp::ServiceExt;

use super::{CliError, runtime};
use crate::config::Config;
use crate::engine::loading::{Loading, NotReady};
use crate::server::mcp::McpServer;
use crate::server::reload::Source;

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    /// Address to listen on (default: `server.listen`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
}

#[derive(Debug, Subcommand)]
pub(super) enum KeyCommand {
    /// Print the SHA-256 of an API key, for `server.api_key_hashes`.
    Hash {
        /// The key (`-` reads it from stdin, keeping it out of the shell history).
        key: String,
    },
}

pub(super) fn serve(args: &ServeArgs, config: &Config, source: Source) -> Result<ExitCode, CliError> {
    let mut config = config.clone();
    let listen = args.listen;
    if let Some(listen) = listen {
        config.server.listen = listen;
    }
    // A reload keeps `--listen` too.
    let source: Source = std::sync::Arc::new(move || {
        let mut config = source()?;
        if let Some(listen) = listen {
            config.server.listen = listen;
        }
        Ok(config)
    });
    runtime()?
        .block_on(crate::server::serve(&config, source))
        .map_err(|e| CliError::Usage(format!("cannot serve on {}: {e:#}", config.server.listen)))?;
    Ok(ExitCode::SUCCESS)
}

/// The MCP face over stdin/stdout (logs go to stderr). It answers
/// `initialize` at once; the engine loads (or builds its index) meanwhile.
/// SIGHUP reloads the engine's share of the config from `source`
/// (credentials, upstream limits, downstream MCP servers).
pub(super) fn mcp(config: &Config, source: Source) -> Result<ExitCode, CliError> {
    let runtime = runtime()?;
    let loading = {
        let _entered = runtime.enter();
        let loading = Loading::start(config);
        #[cfg(unix)]
        {
            let hangups = crate::server::reload::hangups().map_err(anyhow::Error::from)?;
            let reloader = crate::server::reload::Reloader::new(source, loading.clone(), None);
            tokio::spawn(reloader.follow(hangups));
        }
        #[cfg(not(unix))]
        drop(source);
        loading
    };
    let session = loading.clone();
    let served = runtime.block_on(async move {
        let service = McpServer::stdio(session)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CliError::Failure(anyhow::anyhow!("MCP over stdio: {e}")))?;
        service.waiting().await.map_err(|e| CliError::Failure(anyhow::anyhow!("MCP over stdio: {e}")))?;
        Ok::<_, CliError>(())
    });
    if let Err(NotReady::Failed(why)) = loading.engine() {
        return Err(CliError::Failure(anyhow::anyhow!("the engine did not load: {why}")));
    }
    if served.is_ok() && loading.is_loading() {
        // The client left during a first index build. Returning from main
        // would run ONNX Runtime's exit handlers under the embedding thread
        // (it logs kernel errors); end the process at once instead. Nothing
        // is lost: the session's run is recorded, the embedding cache keeps
        // every finished batch (a torn last record is cut on open), and the
        // next start resumes the build.
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: `_exit` ends the process without running exit handlers;
        // no Rust state is used after it.
        unsafe { libc::_exit(0) };
    }
    served?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn key(command: &KeyCommand) -> Result<ExitCode, CliError> {
    let KeyCommand::Hash { key } = command;
    let key = if key == "-" {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map_err(anyhow::Error::from)?;
        line.trim().to_string()
    } else {
        key.clone()
    };
    if key.is_empty() {
        return Err(CliError::Usage("the key is empty".into()));
    }
    println!("{}", crate::server::hash_key(&key));
    Ok(ExitCode::SUCCESS)
}
