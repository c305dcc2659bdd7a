//! Which keys differ between two configurations, named as in the file
//! (`server.listen`, `catalog.mcp_servers`): a reload applies some of
//! them in place and names the others as needing a restart.

use toml::Value;

use super::Config;

impl Config {
    /// The keys whose values differ in `other`, as `section.key`, in
    /// alphabetical order. A list of tables
    /// (`[[catalog.mcp_servers]]`) is one key.
    pub fn changed_keys(&self, other: &Config) -> Vec<String> {
        let (old, new) = (table(self), table(other));
        let mut changed = Vec::new();
        for (section, old_keys) in &old {
            let new_keys = new.get(section).and_then(Value::as_table);
            let Some(old_keys) = old_keys.as_table() else {
                if Some(old_keys) != new.get(section) {
                    changed.push(section.clone());
                }
                continue;
            };
            let empty = toml::Table::new();
            let new_keys = new_keys.unwrap_or(&empty);
            let keys = old_keys.keys().chain(new_keys.keys().filter(|k| !old_keys.contains_key(*k)));
            for key in keys {
                if old_keys.get(key) != new_keys.get(key) {
                    changed.push(format!("{section}.{key}"));
                }
            }
        }
        changed
    }
}

/// A configuration as its TOML table (sections of keys).
fn table(config: &Config) -> toml::Table {
    match Value::try_from(config) {
        Ok(Value::Table(table)) => table,
        _ => unreachable!("a configuration serializes as a table"),
    }
}
