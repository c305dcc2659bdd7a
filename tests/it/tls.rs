//! `toolrouter serve` over TLS (`server.tls_cert_file`,
//! `server.tls_key_file`) with certificates made here by `openssl`: the
//! official `openai` and `mcp` SDKs trusting only the test's certificate,
//! plain HTTP refused, the certificate reloaded when its files change, a
//! broken replacement ignored (the old one keeps serving) and a key that
//! does not go with its certificate refused at start.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, Killed, python_env};

/// A self-signed certificate for `localhost` and 127.0.0.1 in `dir`:
/// (certificate file, key file).
fn make_certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    let status = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", &format!("/CN={name}"), "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs (Debian package openssl)");
    assert!(status.success());
    (cert, key)
}

/// `toolrouter serve` over TLS with `cert` and `key`: (process, https URL).
fn serve_tls(cert: &Path, key: &Path, api_key: &str) -> (Killed, String) {
    use std::io::BufRead;
    let state = tempfile::tempdir().unwrap().keep();
    let mut child = Command::new(common::binary())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", &state)
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_LOG_LEVEL", "warn")
        .env("TOOLROUTER_SERVER_TLS_CERT_FILE", cert)
        .env("TOOLROUTER_SERVER_TLS_KEY_FILE", key)
        .env("TOOLROUTER_SERVER_API_KEY_HASHES", format!("[\"{}\"]", toolrouter::server::hash_key(api_key)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().rsplit(' ').next().unwrap_or("").to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{line}");
    (Killed(child), url)
}

/// Runs `tls_check.py` with `python`; whether it passed.
fn tls_check(python: &Path, args: &[&str]) -> bool {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/tls_check.py");
    let out = Command::new(python).arg(script).args(args).output().unwrap();
    if !out.status.success() {
        eprintln!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    out.status.success()
}

#[test]
fn the_openai_and_mcp_sdks_speak_to_it_over_tls() {
    let Some(openai) = python_env("py-openai", "bin/python") else { return };
    let Some(mcp) = python_env("py-mcp2", "bin/python") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = make_certificate(dir.path(), "first");
    let (_server, url) = serve_tls(&cert, &key, "tls-key");
    let ca = cert.to_str().unwrap();
    assert!(tls_check(&openai, &["openai", &url, ca, "tls-key"]));
    assert!(tls_check(&mcp, &["mcp", &url, ca, "tls-key"]));
    // Plain HTTP on the TLS port gets no HTTP answer.
    let plain = url.replace("https://", "http://");
    assert_eq!(common::http(&plain, "GET", "/healthz", None, b"").0, 0);
}

#[test]
fn a_changed_certificate_is_served_without_a_restart_and_a_broken_one_is_not() {
    let Some(python) = python_env("py-openai", "bin/python") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = make_certificate(dir.path(), "first");
    let (mut server, url) = serve_tls(&cert, &key, "tls-key");
    assert!(tls_check(&python, &["serves", &url, cert.to_str().unwrap()]));
    // A client that drops its connection unread does not kill the server (SIGPIPE).
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");

    // A renewal: both files replaced (by rename, as certificate tools do).
    let (second_cert, second_key) = make_certificate(dir.path(), "second");
    let kept = dir.path().join("second-copy.crt");
    std::fs::copy(&second_cert, &kept).unwrap();
    std::fs::rename(&second_key, &key).unwrap();
    std::fs::rename(&second_cert, &cert).unwrap();
    let started = Instant::now();
    while !tls_check(&python, &["serves", &url, kept.to_str().unwrap()]) {
        assert!(started.elapsed() < Duration::from_secs(15), "the renewed certificate is not served");
        std::thread::sleep(Duration::from_millis(300));
    }

    // A half-written key: the renewed certificate stays in use.
    std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\nnot a key\n").unwrap();
    std::thread::sleep(toolrouter::server::tls::CHECK_EVERY * 2);
    assert!(tls_check(&python, &["serves", &url, kept.to_str().unwrap()]));
    assert!(tls_check(&python, &["openai", &url, kept.to_str().unwrap(), "tls-key"]));
}

#[test]
fn a_key_that_does_not_go_with_its_certificate_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, _) = make_certificate(dir.path(), "first");
    let (_, other_key) = make_certificate(dir.path(), "second");
    let out = Command::new(common::binary())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", dir.path())
        .env("TOOLROUTER_SERVER_TLS_CERT_FILE", &cert)
        .env("TOOLROUTER_SERVER_TLS_KEY_FILE", &other_key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("server.tls_key_file") && stderr.contains("does not go with"), "{stderr}");

    // One of the two alone names the other.
    let out = Command::new(common::binary())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", dir.path())
        .env("TOOLROUTER_SERVER_TLS_CERT_FILE", &cert)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("server.tls_key_file"), "{stderr}");
}
