//! Namespaces: many isolated indexes in one store.
//!
//! A namespace is a whole index of its own (its passages, BM25 statistics, graph, walk
//! and router model), so it ranks exactly as a separate index of its documents would:
//! nothing is shared but the place. The default namespace is the store itself (an index
//! folder, or the URL's PostgreSQL schema), so indexes made before namespaces existed
//! open as it. Other namespaces live beside it: `DIR/namespaces/NAME/` in a folder,
//! one schema each in PostgreSQL, named from a hash of the name and listed in a table of
//! the default schema (see [`super::postgres`]).
//!
//! A name is checked here, once, before it reaches a path or a database: letters,
//! digits, `-`, `_` and `.`, 1 to 64 characters, not only dots (`.` and `..` would name
//! folders that are no namespace).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The folder, inside an index folder, holding its other namespaces.
pub const NAMESPACES_DIR: &str = "namespaces";

/// A checked namespace name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    /// The name of the namespace a store opens when none is named.
    pub const DEFAULT_NAME: &'static str = "default";
    /// The longest name.
    pub const MAX_LEN: usize = 64;

    /// Checks `name`; the error says which rule it breaks.
    pub fn new(name: &str) -> Result<Namespace> {
        let invalid = |why: &str| Error::Config(format!("namespace {:?}: {why}", truncated(name)));
        if name.is_empty() {
            return Err(invalid("empty; a name has 1 to 64 characters"));
        }
        if name.len() > Self::MAX_LEN {
            return Err(invalid(&format!("{} bytes long; a name has at most {}", name.len(), Self::MAX_LEN)));
        }
        if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
            return Err(invalid(&format!("{c:?} is not allowed; use letters, digits, '-', '_' and '.'")));
        }
        if name.bytes().all(|b| b == b'.') {
            return Err(invalid("a name of dots only names no namespace"));
        }
        Ok(Namespace(name.to_string()))
    }

    /// The default namespace: the store itself.
    pub fn default_namespace() -> Namespace {
        Namespace(Self::DEFAULT_NAME.to_string())
    }

    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT_NAME
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The index folder of this namespace in the store folder `root`.
    pub fn folder_in(&self, root: &Path) -> PathBuf {
        if self.is_default() {
            root.to_path_buf()
        } else {
            root.join(NAMESPACES_DIR).join(&self.0)
        }
    }
}

impl Default for Namespace {
    fn default() -> Self {
        Self::default_namespace()
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Namespace {
    type Err = Error;
    fn from_str(s: &str) -> Result<Namespace> {
        Namespace::new(s)
    }
}

impl serde::Serialize for Namespace {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Namespace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Namespace, D::Error> {
        let name = String::deserialize(d)?;
        Namespace::new(&name).map_err(|e| serde::de::Error::custom(e.to_string().trim_start_matches("configuration: ")))
    }
}

/// The error of a namespace the store does not hold.
pub fn not_found(location: &str, namespace: &Namespace) -> Error {
    Error::NoNamespace { store: location.to_string(), namespace: namespace.to_string() }
}

/// At most 80 characters of a rejected name, for messages.
fn truncated(name: &str) -> String {
    name.chars().take(80).collect()
}

/// The namespaces of the store folder `root` that hold an index, the default first when
/// it holds one.
pub(crate) fn in_folder(root: &Path) -> Result<Vec<Namespace>> {
    let mut names = Vec::new();
    if root.join("CURRENT").is_file() {
        names.push(Namespace::default_namespace());
    }
    let dir = root.join(NAMESPACES_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut others: Vec<Namespace> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("CURRENT").is_file())
        // A folder whose name is no namespace name was not made by hoprag: not listed.
        .filter_map(|e| e.file_name().to_str().and_then(|n| Namespace::new(n).ok()))
        .filter(|n| !n.is_default())
        .collect();
    others.sort();
    names.extend(others);
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rules() {
        for ok in ["2wiki-dev", "a", "A.b_c-9", &"x".repeat(64), "..a", "default"] {
            assert_eq!(Namespace::new(ok).unwrap().as_str(), ok);
        }
        for (bad, why) in [
            ("", "empty"),
            (&"x".repeat(65) as &str, "at most 64"),
            ("a/b", "'/'"),
            ("..", "dots only"),
            (".", "dots only"),
            ("a b", "' '"),
            ("é", "'é'"),
            ("x';drop", "'\\''"),
            ("a\0", "'\\0'"),
        ] {
            let e = Namespace::new(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_default_namespace_is_the_store_itself() {
        let root = Path::new("/idx");
        assert_eq!(Namespace::default().folder_in(root), root);
        assert_eq!(Namespace::new("c1").unwrap().folder_in(root), Path::new("/idx/namespaces/c1"));
    }
}
