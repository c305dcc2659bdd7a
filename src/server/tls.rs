//! TLS on the listener (`server.tls_cert_file`, `server.tls_key_file`):
//! rustls with the PEM certificate chain and private key, reloaded when
//! either file changes.
//!
//! The pair in use is a [`CertifiedKey`] behind an [`ArcSwap`], handed to
//! rustls by [`Certificates`] as its certificate resolver, so a reload
//! changes the certificate for new connections without touching those
//! open. [`watch`] checks the files' modification times and lengths every
//! [`CHECK_EVERY`] and loads a changed pair; a pair that does not load
//! (half-written, key not matching the certificate) is logged and the old
//! one keeps serving. Polling rather than inotify (the `notify` crate): a
//! certificate renewed by swapping a symlink (Kubernetes secrets,
//! cert-manager) changes no watched inode, and one `stat` of two files
//! every few seconds costs nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::config::ServerConfig;

/// How often [`watch`] looks at the certificate and key files.
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// The certificate chain and key the listener presents (rustls' resolver).
#[derive(Debug)]
pub(crate) struct Certificates {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: ArcSwap<CertifiedKey>,
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl Certificates {
    /// The pair of `server.tls_cert_file` and `server.tls_key_file`
    /// (`None` when they are not set: plain HTTP).
    pub(crate) fn open(config: &ServerConfig) -> anyhow::Result<Option<Arc<Certificates>>> {
        let (cert_file, key_file) = (&config.tls_cert_file, &config.tls_key_file);
        if cert_file.as_os_str().is_empty() {
            return Ok(None);
        }
        let pair = load(cert_file, key_file)?;
        Ok(Some(Arc::new(Certificates {
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
            current: ArcSwap::from_pointee(pair),
        })))
    }

    /// The acceptor of TLS connections presenting these certificates
    /// (HTTP/1.1 by ALPN: the listener speaks nothing else).
    pub(crate) fn acceptor(self: &Arc<Self>) -> anyhow::Result<TlsAcceptor> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// Loads the files again; on failure the pair in use stays.
    pub(crate) fn reload(&self) -> anyhow::Result<()> {
        let pair = load(&self.cert_file, &self.key_file)?;
        self.current.store(Arc::new(pair));
        Ok(())
    }

    /// What identifies the files' contents without reading them.
    fn stamp(&self) -> Option<[(SystemTime, u64); 2]> {
        let stamp = |path: &Path| std::fs::metadata(path).and_then(|m| Ok((m.modified()?, m.len()))).ok();
        Some([stamp(&self.cert_file)?, stamp(&self.key_file)?])
    }
}

/// Reloads `certificates` whenever their files change, for ever.
pub(crate) async fn watch(certificates: Arc<Certificates>) {
    // `loaded`: the files' stamp when they last loaded; `failed`: when
    // they last failed to (tried again each time, said once: a renewal
    // caught between its two files loads on the next look).
    let (mut loaded, mut failed) = (certificates.stamp(), None);
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = certificates.stamp();
        if now.is_none() || now == loaded {
            continue;
        }
        match certificates.reload() {
            Ok(()) => {
                (loaded, failed) = (now, None);
                tracing::info!(cert = %certificates.cert_file.display(), "TLS certificate reloaded");
            }
            Err(e) if failed != now => {
                failed = now;
                tracing::error!("TLS certificate not reloaded, the previous one stays in use: {e:#}");
            }
            Err(_) => {}
        }
    }
}

/// The certificate chain and key of two PEM files, checked to match.
fn load(cert_file: &Path, key_file: &Path) -> anyhow::Result<CertifiedKey> {
    let read = |key: &str, path: &Path| {
        std::fs::read(path).map_err(|e| anyhow::anyhow!("server.{key} {}: {e}", path.display()))
    };
    let pem = read("tls_cert_file", cert_file)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("server.tls_cert_file {}: not PEM certificates: {e}", cert_file.display()))?;
    if chain.is_empty() {
        anyhow::bail!("server.tls_cert_file {}: no CERTIFICATE block in it", cert_file.display());
    }
    let key = PrivateKeyDer::from_pem_slice(&read("tls_key_file", key_file)?)
        .map_err(|e| anyhow::anyhow!("server.tls_key_file {}: no PEM private key in it ({e})", key_file.display()))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| {
        anyhow::anyhow!(
            "server.tls_key_file {} does not go with server.tls_cert_file {}: {e}",
            key_file.display(),
            cert_file.display()
        )
    })
}
