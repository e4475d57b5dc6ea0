//! Browser ownership: which agent node drives which browser node, persisted to
//! `browser-owners.json` so it survives a restart.

use std::path::{Path, PathBuf};
use std::{collections::BTreeMap, io};

use serde_json::Value;

use crate::base::files::{private_json, read_json};

/// Browser node id → owning agent node id, backed by a private JSON file.
#[derive(Debug)]
pub struct BrowserOwners {
    path: PathBuf,
    owners: BTreeMap<String, String>,
}

impl BrowserOwners {
    /// Loads the map from `path`. A missing file is an empty map; so is an unreadable one,
    /// whose entries that are not `"browser": "agent"` strings are dropped: ownership is
    /// advisory state an agent can re-claim, never a reason not to start.
    pub fn load(path: &Path) -> BrowserOwners {
        let owners = match read_json(path) {
            Ok(Some(Value::Object(map))) => map
                .into_iter()
                .filter_map(|(browser, owner)| Some((browser, owner.as_str()?.to_string())))
                .collect(),
            _ => BTreeMap::new(),
        };
        let path = path.to_path_buf();
        BrowserOwners { path, owners }
    }

    /// The owner of a browser node.
    pub fn owner(&self, browser: &str) -> Option<&str> {
        self.owners.get(browser).map(String::as_str)
    }

    /// Makes `agent` the owner of `browser` and persists the map.
    pub fn set(&mut self, browser: &str, agent: &str) -> io::Result<()> {
        self.owners.insert(browser.to_string(), agent.to_string());
        self.persist()
    }

    /// Drops every browser `agent` owned and persists the map.
    pub fn release_all(&mut self, agent: &str) -> io::Result<()> {
        self.owners.retain(|_, owner| owner != agent);
        self.persist()
    }

    /// Writes the map with `private_json`.
    pub fn persist(&self) -> io::Result<()> {
        let map = serde_json::to_value(&self.owners).map_err(io::Error::other)?;
        private_json(&self.path, &map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn persists_and_reloads_and_tolerates_junk() {
        let dir = std::env::temp_dir().join(format!("tst-owners-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        crate::base::files::private_dir(&dir).unwrap();
        let path = dir.join("browser-owners.json");
        let mut owners = BrowserOwners::load(&path);
        assert_eq!(owners.owner("b1"), None);
        owners.set("b1", "a").unwrap();
        owners.set("b2", "a").unwrap();
        owners.set("b3", "c").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let mut again = BrowserOwners::load(&path);
        assert_eq!(
            (again.owner("b1"), again.owner("b3")),
            (Some("a"), Some("c"))
        );
        again.release_all("a").unwrap();
        let third = BrowserOwners::load(&path);
        assert_eq!(
            (third.owner("b1"), third.owner("b2"), third.owner("b3")),
            (None, None, Some("c"))
        );
        fs::write(&path, r#"{"b1": 5, "b2": "x"}"#).unwrap();
        assert_eq!(BrowserOwners::load(&path).owner("b2"), Some("x"));
        fs::write(&path, "{").unwrap();
        assert_eq!(BrowserOwners::load(&path).owner("b2"), None);
        fs::remove_dir_all(dir).unwrap();
    }
}
