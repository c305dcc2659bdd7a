use std::path::Path;

use toml::{Table, Value};

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn load_text(text: &str, vars: &[(&str, &str)]) -> (tempfile::TempDir, Result<(Config, Vec<String>), ConfigError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolrouter.toml");
    std::fs::write(&path, text).unwrap();
    let result = Config::load_with_env(Some(&path), env(vars));
    (dir, result)
}

#[test]
fn the_shipped_file_states_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/toolrouter.toml");
    let (config, warnings) = Config::load_with_env(Some(&path), Vec::new()).unwrap();
    assert_eq!(config, Config::default());
    assert!(warnings.is_empty());
    // And every key of the defaults appears in the shipped file.
    let shipped: Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    let defaults = Value::try_from(Config::default()).unwrap();
    for (section, keys) in defaults.as_table().unwrap() {
        for key in keys.as_table().unwrap().keys() {
            assert!(shipped.get(section).and_then(|s| s.get(key)).is_some(), "{section}.{key} is not documented");
        }
    }
}

#[test]
fn environment_overrides_every_kind_of_key() {
    let vars = [
        ("TOOLROUTER_ARGS_STRICT", "false"),
        ("TOOLROUTER_UPSTREAM_ALLOWED_HOSTS", "127.0.0.1:8089, *.internal.example"),
        ("TOOLROUTER_LOG_LEVEL", "debug"),
        ("TOOLROUTER_LOG_FORMAT", "json"),
        ("TOOLROUTER_CATALOG_QUERY_FILES", "[]"),
        ("UNRELATED", "x"),
    ];
    let (config, warnings) = Config::load_with_env(None, env(&vars)).unwrap();
    assert!(!config.args.strict);
    assert_eq!(config.upstream.allowed_hosts, ["127.0.0.1:8089", "*.internal.example"]);
    assert_eq!(config.log.level, "debug");
    assert_eq!(config.log.format, LogFormat::Json);
    assert!(warnings.is_empty());
}

#[test]
fn unknown_environment_variables_are_warned_about() {
    let (_, warnings) = Config::load_with_env(None, env(&[("TOOLROUTER_ARGS_STRICTT", "true")])).unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("TOOLROUTER_ARGS_STRICTT"));
    // The scripts' own variables are documented, not keys, and not warned about.
    let documented = [("TOOLROUTER_MODELS", "/models"), ("TOOLROUTER_PYENVS", "/envs")];
    let (_, warnings) = Config::load_with_env(None, env(&documented)).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn errors_name_the_key_and_where_it_was_set() {
    let err = Config::load_with_env(None, env(&[("TOOLROUTER_ARGS_STRICT", "maybe")])).unwrap_err().to_string();
    assert_eq!(err, "config key `args.strict` (set by TOOLROUTER_ARGS_STRICT): expected true or false, got \"maybe\"");
    // A key left at its default that no longer fits one that was set.
    let vars = env(&[("TOOLROUTER_SERVER_REQUEST_TIMEOUT_MS", "6000")]);
    let err = Config::load_with_env(None, vars).unwrap_err().to_string();
    assert!(err.starts_with("config key `openai.execute_deadline_ms` (its default): "), "{err}");

    let (_, r) = load_text("[args]\nstrict = \"yes\"\n", &[]);
    let err = r.unwrap_err().to_string();
    assert!(err.starts_with("config key `args.strict` (in "), "{err}");
    assert!(err.contains("invalid type"), "{err}");

    let (_, r) = load_text("[catalog]\npathz = []\n", &[]);
    let err = r.unwrap_err().to_string();
    assert!(err.contains("`catalog.pathz`") && err.contains("unknown field `pathz`"), "{err}");

    let (_, r) = load_text("[catalgo]\n", &[]);
    assert!(r.unwrap_err().to_string().contains("unknown field `catalgo`"));

    let (_, r) = load_text("[log]\nformat = \"xml\"\n", &[]);
    assert!(r.unwrap_err().to_string().contains("`log.format`"));

    let (_, r) = load_text("[log]\nlevel = \"loud=!!\"\n", &[]);
    assert!(r.unwrap_err().to_string().contains("`log.level`"));

    let (_, r) = load_text("[upstream]\nallowed_hosts = [\"http://x/y\"]\n", &[]);
    assert!(r.unwrap_err().to_string().contains("`upstream.allowed_hosts[0]`"));

    let err = Config::load_with_env(None, env(&[("TOOLROUTER_SERVER_THREADS", "1000")])).unwrap_err().to_string();
    assert!(err.contains("`server.threads`") && err.contains("0 (one per core) to 256"), "{err}");

    let (_, r) = load_text("not toml = = 1", &[]);
    assert!(matches!(r.unwrap_err(), ConfigError::Syntax { .. }));
}

#[test]
fn paths_must_exist_and_resolve_against_the_file() {
    let (_, r) = load_text("[catalog]\npaths = [\"missing-dir\"]\n", &[]);
    let err = r.unwrap_err().to_string();
    assert!(err.starts_with("config key `catalog.paths[0]`"), "{err}");
    assert!(err.contains("missing-dir does not exist"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("specs")).unwrap();
    let path = dir.path().join("toolrouter.toml");
    std::fs::write(&path, "[catalog]\npaths = [\"specs\"]\n").unwrap();
    let (config, _) = Config::load_with_env(Some(&path), Vec::new()).unwrap();
    assert_eq!(config.catalog.paths, [dir.path().join("specs")]);
}

#[test]
fn credential_secret_files_resolve_against_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolrouter.toml");
    let text = "[[upstream.credentials]]\nhost = \"api.example.com\"\nsecret = { file = \"secrets/token\" }\n\n\
        [[catalog.mcp_servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\n\
        secret_headers = { Authorization = { file = \"secrets/mcp\" } }\n";
    std::fs::write(&path, text).unwrap();
    let (config, _) = Config::load_with_env(Some(&path), Vec::new()).unwrap();
    assert_eq!(config.upstream.credentials[0].secret.file, dir.path().join("secrets/token"));
    let header = &config.catalog.mcp_servers[0].secret_headers["Authorization"];
    assert_eq!(header.file, dir.path().join("secrets/mcp"));
}

#[test]
fn secrets_are_refused_in_the_file_and_read_from_key_files() {
    let (_, r) = load_text("[upstream]\nrapidapi_key = \"abc\"\n", &[]);
    let err = r.unwrap_err().to_string();
    assert!(err.contains("secrets cannot be set in the config file"), "{err}");
    assert!(!err.contains("abc"), "the secret is not echoed: {err}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("key"), "  s3cret\n").unwrap();
    std::fs::write(dir.path().join("empty"), "\n").unwrap();
    let path = dir.path().join("toolrouter.toml");
    std::fs::write(&path, "[upstream]\nrapidapi_key_file = \"key\"\n").unwrap();
    let (config, _) = Config::load_with_env(Some(&path), Vec::new()).unwrap();
    if std::env::var(RAPIDAPI_KEY_ENV).is_err() {
        assert_eq!(config.rapidapi_key().unwrap().unwrap().expose(), "s3cret");
        assert_eq!(format!("{:?}", config.rapidapi_key().unwrap().unwrap()), "Secret(<redacted>)");
    }
    std::fs::write(&path, "[upstream]\nrapidapi_key_file = \"empty\"\n").unwrap();
    if std::env::var(RAPIDAPI_KEY_ENV).is_err() {
        let err = Config::load_with_env(Some(&path), Vec::new()).unwrap_err().to_string();
        assert!(err.contains("`upstream.rapidapi_key_file`") && err.contains("is empty"), "{err}");
    }
}

#[test]
fn sections_are_checked_in_the_order_config_declares_them() {
    // `[compress]` comes before `[planner]` in `Config`, whatever the file's order.
    let (_, r) = load_text("[planner]\nmax_steps = 0\n[compress]\nbudget = 1\n", &[]);
    let err = r.unwrap_err().to_string();
    assert!(err.starts_with("config key `compress.budget`"), "{err}");
    // The check across sections runs after every section's own.
    let (_, r) = load_text("[openai]\nexecute_deadline_ms = 0\n[log]\nlevel = \"loud=!!\"\n", &[]);
    let err = r.unwrap_err().to_string();
    assert!(err.starts_with("config key `log.level`"), "{err}");
}

/// The federation example loads: its servers, its credential, its spec
/// path resolved against the example's directory.
#[test]
fn the_federation_example_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/federation.toml");
    let (config, warnings) = Config::load_with_env(Some(&path), Vec::new()).unwrap();
    assert!(warnings.is_empty());
    let names: Vec<&str> = config.catalog.mcp_servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["time", "git", "everything"]);
    assert!(config.catalog.paths[0].ends_with("examples/inventory.openapi.yaml") && config.catalog.paths[0].is_file());
    assert_eq!(config.upstream.credentials[0].host, "inventory.internal.example");
    assert_eq!(config.upstream.credentials[0].secret.env, "INVENTORY_TOKEN");
}

#[test]
fn mcp_servers_and_credentials_are_checked() {
    for (text, key, says) in [
        ("[[catalog.mcp_servers]]\nname = \"a__b\"\ncommand = \"x\"\n", "catalog.mcp_servers[0].name", "no `__`"),
        ("[[catalog.mcp_servers]]\nname = \"a\"\n", "catalog.mcp_servers[0].command", "`command` (stdio) or `url`"),
        (
            "[[catalog.mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h/mcp\"\n",
            "catalog.mcp_servers[0].url",
            "not both",
        ),
        (
            "[[catalog.mcp_servers]]\nname = \"a\"\nurl = \"ftp://h/mcp\"\n",
            "catalog.mcp_servers[0].url",
            "http or https",
        ),
        (
            "[[catalog.mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[catalog.mcp_servers]]\nname = \"A\"\ncommand = \"y\"\n",
            "catalog.mcp_servers[1].name",
            "already the name",
        ),
        (
            "[[catalog.mcp_servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\nsecret_headers = { Authorization = { env = \"T\", file = \"f\" } }\n",
            "catalog.mcp_servers[0].secret_headers.Authorization",
            "exactly one",
        ),
        (
            "[[upstream.credentials]]\nhost = \"h\"\nscheme = \"header\"\nsecret = { env = \"T\" }\n",
            "upstream.credentials[0].name",
            "required",
        ),
        (
            "[[upstream.credentials]]\nhost = \"https://h/\"\nsecret = { env = \"T\" }\n",
            "upstream.credentials[0].host",
            "not a host",
        ),
        (
            "[[upstream.credentials]]\nhost = \"h\"\nscheme = \"basic\"\nsecret = { env = \"T\" }\n",
            "upstream.credentials[0].username",
            "username",
        ),
    ] {
        let (_, r) = load_text(text, &[]);
        let err = r.unwrap_err().to_string();
        assert!(err.contains(&format!("`{key}`")) && err.contains(says), "{text}: {err}");
    }
}

#[test]
fn allowed_hosts_are_host_names_or_one_star() {
    for (hosts, says) in [
        (r#"["*", "a.example"]"#, "allows any host: give it alone"),
        (r#"["http://a.example"]"#, "is not a host name"),
        (r#"["a.example/mcp"]"#, "is not a host name"),
        (r#"[""]"#, "is not a host name"),
    ] {
        let (_, r) = load_text(&format!("[server]\nallowed_hosts = {hosts}\n"), &[]);
        let err = r.unwrap_err().to_string();
        assert!(err.contains("server.allowed_hosts[") && err.contains(says), "{hosts}: {err}");
    }
    let (_, r) = load_text("[server]\nallowed_hosts = [\"toolrouter.internal\", \"gw.example:8443\"]\n", &[]);
    let hosts = r.unwrap().0.server.mcp_hosts();
    assert_eq!(hosts, ["localhost", "127.0.0.1", "::1", "127.0.0.1", "toolrouter.internal", "gw.example:8443"]);
    let (_, r) = load_text("[server]\nallowed_hosts = [\"*\"]\n", &[]);
    assert!(r.unwrap().0.server.mcp_hosts().is_empty(), "any host: rmcp's empty list");
}

#[test]
fn changed_keys_are_named_as_in_the_file() {
    let old = Config::default();
    assert!(old.changed_keys(&old.clone()).is_empty());
    let mut new = old.clone();
    new.server.listen = "127.0.0.1:9".parse().unwrap();
    new.server.client_rate = 3.0;
    new.catalog.mcp_servers = vec![McpServerConfig { name: "time".into(), ..McpServerConfig::default() }];
    new.upstream.credentials = vec![CredentialConfig { host: "api.example.com".into(), ..Default::default() }];
    assert_eq!(
        old.changed_keys(&new),
        ["catalog.mcp_servers", "server.client_rate", "server.listen", "upstream.credentials"],
        "in alphabetical order"
    );
    assert_eq!(new.changed_keys(&old).len(), 4, "the other way round too");
}

#[test]
fn policies_are_checked_rule_by_rule_and_key_by_key() {
    let (a, b) = ("a".repeat(64), "b".repeat(64));
    let keys = format!("[server]\napi_key_hashes = [\"{a}\", \"{b}\"]\n");
    let policy = |name: &str, hashes: &str, allow: &str, deny: &str| {
        format!("[[access.policies]]\nname = \"{name}\"\nkey_hashes = [{hashes}]\nallow = [{allow}]\ndeny = [{deny}]\n")
    };
    let good = format!("{keys}{}", policy("weather", &format!("\"{a}\""), "\"category:Weather\"", "\"destructive\""));
    let (_, r) = load_text(&good, &[]);
    assert_eq!(r.unwrap().0.access.policies[0].allow, ["category:Weather"]);
    for (text, key, says) in [
        (
            format!("{keys}{}", policy("p", "", "\"owner:me\"", "")),
            "access.policies[0].allow",
            "unknown rule kind `owner`",
        ),
        (
            format!("{keys}{}", policy("p", "", "", "\"writes\"")),
            "access.policies[0].deny",
            "the rules are source:GLOB",
        ),
        (format!("{keys}{}", policy("", "", "", "")), "access.policies[0].name", "needs a name"),
        (format!("{keys}{}", policy("p", "\"abc\"", "", "")), "access.policies[0].key_hashes", "not a SHA-256"),
        (
            format!("{keys}{}", policy("p", &format!("\"{}\"", "c".repeat(64)), "", "")),
            "access.policies[0].key_hashes",
            "not an accepted key",
        ),
        (
            format!("{keys}{}{}", policy("p", &format!("\"{a}\""), "", ""), policy("q", &format!("\"{a}\""), "", "")),
            "access.policies[1].key_hashes",
            "already governed by access.policies[0]",
        ),
        (
            format!("{keys}{}{}", policy("p", "", "", ""), policy("p", "", "", "")),
            "access.policies[1].name",
            "already the name",
        ),
    ] {
        let (_, r) = load_text(&text, &[]);
        let err = r.unwrap_err().to_string();
        assert!(err.contains(&format!("`{key}`")) && err.contains(says), "{text}: {err}");
    }
    for (text, key, says) in [
        ("[access]\nconsent_timeout_s = 0\n", "access.consent_timeout_s", "at least 1"),
        ("[access]\nread_only = [\"kind:x\"]\n", "access.read_only", "unknown rule kind `kind`"),
        ("[access]\ndestructive = [\"name:\"]\n", "access.destructive", "empty"),
        ("[access]\nallow_flagged = [\"sometimes\"]\n", "access.allow_flagged", "unknown rule"),
    ] {
        let (_, r) = load_text(text, &[]);
        let err = r.unwrap_err().to_string();
        assert!(err.contains(&format!("`{key}`")) && err.contains(says), "{text}: {err}");
    }
    let (_, r) = load_text("[access]\nconsent = \"sometimes\"\n", &[]);
    assert!(r.unwrap_err().to_string().contains("sometimes"), "an unknown consent mode is refused");
    let (_, r) = load_text(&format!("{keys}[[access.policies]]\nname = \"p\"\nallowed = []\n"), &[]);
    assert!(r.unwrap_err().to_string().contains("allowed"), "an unknown field is refused");
}

#[test]
fn oauth_is_checked_key_by_key_and_scopes_need_it() {
    let oauth = "[server.oauth]\nissuer = \"https://as.example\"\nresource = \"https://tr.example/mcp\"\n";
    let (_, r) = load_text(&format!("{oauth}scopes = [\"tools:weather\"]\n"), &[]);
    let loopback = "[server.oauth]\nissuer = \"http://127.0.0.1:9000\"\nresource = \"http://localhost:8080/mcp\"\n";
    assert!(load_text(loopback, &[]).1.is_ok(), "plain HTTP on loopback");
    let config = r.unwrap().0;
    assert!(config.server.oauth.enabled() && config.server.oauth.leeway_s == DEFAULT_OAUTH_LEEWAY_S);
    let scoped = |name: &str, scope: &str| format!("[[access.policies]]\nname = \"{name}\"\nscopes = [\"{scope}\"]\n");
    let (_, r) = load_text(&format!("{oauth}{}{}", scoped("w", "tools:weather"), scoped("a", "tools:all")), &[]);
    assert_eq!(r.unwrap().0.access.policies[1].scopes, ["tools:all"]);
    for (text, key, says) in [
        ("[server.oauth]\nresource = \"https://tr.example/mcp\"\n".to_string(), "server.oauth.issuer", "is needed"),
        ("[server.oauth]\nissuer = \"https://as.example\"\n".into(), "server.oauth.resource", "not an http(s) URL"),
        (oauth.replace("https://as.example", "as.example"), "server.oauth.issuer", "not an http(s) URL"),
        (format!("{oauth}jwks_uri = \"file:///etc/keys\"\n"), "server.oauth.jwks_uri", "not an http(s) URL"),
        (format!("{oauth}jwks_uri = \"http://keys.example/jwks\"\n"), "server.oauth.jwks_uri", "must be https"),
        (oauth.replace("https://as.example", "http://as.example"), "server.oauth.issuer", "must be https"),
        (format!("{oauth}scopes = [\"a\\\\b\"]\n"), "server.oauth.scopes", "not a scope"),
        (format!("{oauth}scopes = [\"a b\"]\n"), "server.oauth.scopes", "not a scope"),
        (format!("{oauth}leeway_s = 3600\n"), "server.oauth.leeway_s", "at most"),
        (format!("{oauth}jwks_timeout_ms = 0\n"), "server.oauth.jwks_timeout_ms", "at least 1"),
        (scoped("w", "tools:weather"), "access.policies[0].scopes", "set server.oauth.issuer first"),
        ("[mcp]\nstdio_policy = \"desk\"\n".into(), "mcp.stdio_policy", "not the name of any [[access.policies]]"),
        (format!("{oauth}{}", scoped("w", "two words")), "access.policies[0].scopes", "not a scope"),
        (
            format!("{oauth}{}{}", scoped("w", "tools:x"), scoped("a", "tools:x")),
            "access.policies[1].scopes",
            "already puts tokens under access.policies[0]",
        ),
    ] {
        let (_, r) = load_text(&text, &[]);
        let err = r.unwrap_err().to_string();
        assert!(err.contains(&format!("`{key}`")) && err.contains(says), "{text}: {err}");
    }
}
