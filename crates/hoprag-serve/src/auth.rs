//! Who may do what: bearer tokens, each opening a set of namespaces to read, and a set
//! to write (writing implies reading).
//!
//! Tokens come from `serve.token` (env `HOPRAG_TOKEN`: one token over every namespace,
//! read and write, as before namespaces) and from a tokens file (`serve.tokens_file`),
//! TOML, which holds each token's SHA-256, never the token:
//!
//! ```toml
//! [[token]]
//! name = "acme-app"          # for logs and messages; never secret
//! sha256 = "64 hex digits"   # of the token's bytes
//! read = ["acme", "acme-eu"] # "*": every namespace
//! write = ["acme"]
//! ```
//!
//! A plain SHA-256 (not a password hash) is enough: tokens are long random strings
//! (`hoprag token new` makes 256-bit ones), which no dictionary guesses. A given token
//! is hashed once and compared with every stored digest in constant time, so the
//! answer's timing says nothing about which digest came close.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use hoprag::error::{Error, Result};
use hoprag::store::Namespace;

/// What a request needs of its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Namespaces a token opens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Names {
    All,
    These(BTreeSet<Namespace>),
}

impl Names {
    fn contains(&self, namespace: &Namespace) -> bool {
        match self {
            Names::All => true,
            Names::These(set) => set.contains(namespace),
        }
    }

    fn parse(values: &[String], field: &str) -> std::result::Result<Names, String> {
        if values.iter().any(|v| v == "*") {
            return Ok(Names::All);
        }
        let mut set = BTreeSet::new();
        for v in values {
            set.insert(Namespace::new(v).map_err(|e| format!("{field}: {}", plain(&e)))?);
        }
        Ok(Names::These(set))
    }
}

/// What one token may do.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The token's name in the tokens file (`serve.token` for the single token), for logs.
    pub name: String,
    read: Names,
    write: Names,
}

impl Scope {
    /// Every namespace, read and write: the single `serve.token`, or no token at all.
    pub fn everything(name: &str) -> Scope {
        Scope { name: name.to_string(), read: Names::All, write: Names::All }
    }

    pub fn allows(&self, namespace: &Namespace, access: Access) -> bool {
        match access {
            Access::Read => self.read.contains(namespace) || self.write.contains(namespace),
            Access::Write => self.write.contains(namespace),
        }
    }

    /// Whether the token reads every namespace, and so may see what the server as a whole
    /// does (request counts of every route, the LLM's totals).
    pub fn reads_everything(&self) -> bool {
        self.read == Names::All || self.write == Names::All
    }
}

/// The server's tokens.
pub struct Tokens {
    entries: Vec<([u8; 32], Arc<Scope>)>,
    /// No token configured: every request may do everything.
    open: Arc<Scope>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    sha256: String,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
}

impl Tokens {
    /// The tokens of `single` (a token over everything) and of the tokens file `file`.
    pub fn new(single: Option<&str>, file: Option<&Path>) -> Result<Tokens> {
        let mut entries = Vec::new();
        if let Some(token) = single.filter(|t| !t.is_empty()) {
            entries.push((Sha256::digest(token).into(), Arc::new(Scope::everything("serve.token"))));
        }
        if let Some(path) = file {
            entries.extend(read_file(path)?);
        }
        let mut digests: Vec<&[u8; 32]> = entries.iter().map(|(d, _)| d).collect();
        digests.sort();
        if digests.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::Config("two tokens have the same SHA-256: one token, one scope".into()));
        }
        Ok(Tokens { entries, open: Arc::new(Scope::everything("(no token)")) })
    }

    /// Whether some token opens only some namespaces.
    pub fn scoped(&self) -> bool {
        self.entries.iter().any(|(_, scope)| !scope.reads_everything())
    }

    /// Whether requests must carry a token.
    pub fn required(&self) -> bool {
        !self.entries.is_empty()
    }

    /// The scope of the token `given`, or `None` when it is no token of the server's;
    /// everything when the server has no token.
    pub fn scope_of(&self, given: Option<&str>) -> Option<Arc<Scope>> {
        if !self.required() {
            return Some(self.open.clone());
        }
        let digest: [u8; 32] = Sha256::digest(given?).into();
        // Every digest compared, whichever matches: the time does not depend on which.
        let mut found = None;
        for (expected, scope) in &self.entries {
            if bool::from(expected[..].ct_eq(&digest[..])) {
                found = Some(scope.clone());
            }
        }
        found
    }
}

fn read_file(path: &Path) -> Result<Vec<([u8; 32], Arc<Scope>)>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let file: TokensFile = toml::from_str(&text).map_err(|e| Error::input(path, e.to_string()))?;
    let mut entries = Vec::new();
    for (i, t) in file.token.into_iter().enumerate() {
        let at = |field: &str, message: String| {
            Error::input(path, format!("token {} ({:?}): {field}: {message}", i + 1, t.name))
        };
        let digest = hex::decode(t.sha256.trim())
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or_else(|| at("sha256", "not 64 hex digits (the SHA-256 of the token)".into()))?;
        let read = Names::parse(&t.read, "read").map_err(|m| at("read", m))?;
        let write = Names::parse(&t.write, "write").map_err(|m| at("write", m))?;
        if read == Names::These(BTreeSet::new()) && write == Names::These(BTreeSet::new()) {
            return Err(at("read", "the token opens no namespace".into()));
        }
        entries.push((digest, Arc::new(Scope { name: t.name, read, write })));
    }
    Ok(entries)
}

/// A new random token (256 bits, hex) and the tokens-file entry for it.
pub fn new_token(name: &str, read: &[String], write: &[String]) -> Result<(String, String)> {
    Names::parse(read, "read").map_err(Error::Config)?;
    Names::parse(write, "write").map_err(Error::Config)?;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| Error::Other(format!("no random bytes from the OS: {e}")))?;
    let token = format!("hop_{}", hex::encode(bytes));
    let list = |v: &[String]| v.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ");
    let entry = format!(
        "[[token]]\nname = {name:?}\nsha256 = \"{}\"\nread = [{}]\nwrite = [{}]\n",
        hex::encode(Sha256::digest(&token)),
        list(read),
        list(write)
    );
    Ok((token, entry))
}

/// The default tokens file of a store folder, when it has one.
pub fn default_file(folder: Option<&Path>) -> Option<PathBuf> {
    folder.map(|f| f.join("tokens.toml")).filter(|p| p.is_file())
}

fn plain(e: &Error) -> String {
    e.to_string().trim_start_matches("configuration: ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_token_opens_its_namespaces_only() {
        let (_, reader) = new_token("r", &["a".into()], &[]).unwrap();
        let (w, writer) = new_token("w", &[], &["b".into()]).unwrap();
        let (_dir, path) = file(&format!("{reader}\n{writer}"));
        let tokens = Tokens::new(Some("admin"), Some(&path)).unwrap();
        assert!(tokens.required());
        let (a, b) = (Namespace::new("a").unwrap(), Namespace::new("b").unwrap());
        let scope = tokens.scope_of(Some(&w)).unwrap();
        assert_eq!(scope.name, "w");
        assert!(scope.allows(&b, Access::Write) && scope.allows(&b, Access::Read));
        assert!(!scope.allows(&a, Access::Read) && !scope.reads_everything());
        let admin = tokens.scope_of(Some("admin")).unwrap();
        assert!(admin.allows(&a, Access::Write) && admin.reads_everything());
        assert!(tokens.scope_of(Some("nope")).is_none());
        assert!(tokens.scope_of(None).is_none());
        let open = Tokens::new(None, None).unwrap();
        assert!(!open.required() && open.scope_of(None).unwrap().allows(&a, Access::Write));
    }

    #[test]
    fn a_bad_tokens_file_names_the_token_and_field() {
        for (text, expected) in [
            ("[[token]]\nname = \"x\"\nsha256 = \"abc\"\nread = [\"a\"]\n", "token 1 (\"x\"): sha256"),
            (&format!("[[token]]\nname = \"x\"\nsha256 = \"{}\"\nread = [\"../a\"]\n", "0".repeat(64)), "read"),
            (&format!("[[token]]\nname = \"x\"\nsha256 = \"{}\"\n", "0".repeat(64)), "opens no namespace"),
            ("[[token]]\nname = \"x\"\nsecret = \"s\"\n", "unknown field"),
        ] {
            let (_dir, path) = file(text);
            let e = Tokens::new(None, Some(&path)).err().unwrap().to_string();
            assert!(e.contains(expected) && e.contains("tokens.toml"), "{e}");
        }
        let digest = hex::encode(Sha256::digest("t"));
        let (_dir, path) = file(&format!("[[token]]\nname = \"x\"\nsha256 = \"{digest}\"\nread = [\"*\"]\n"));
        assert!(Tokens::new(Some("t"), Some(&path)).err().unwrap().to_string().contains("same SHA-256"));
    }
}
