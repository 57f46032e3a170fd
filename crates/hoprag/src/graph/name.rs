//! Interned names: the strings a graph repeats millions of times (a triple's subject,
//! predicate and object: a few thousand entity names and predicates stated by millions of
//! triples) held once each and shared.
//!
//! A triple's three owned `String`s were three allocations and 72 bytes of headers; a
//! [`Name`] is a shared pointer (16 bytes) to one copy of the text. Names read back from
//! a stored graph share their copies when the read runs inside [`interning`]; built ones
//! when they come from one [`Interner`].

//! Interned names: the strings a graph repeats millions of times (a triple's subject,
//! predicate and object: a few thousand entity names and predicates stated by millions of
//! triples) held once each, process-wide, and named by a 4-byte id.
//!
//! A triple's three owned `String`s were three allocations and 72 bytes of headers; a
//! shared pointer per name (16 bytes) still made a triple 56 bytes, 1.3 GB at 23.6 M
//! triples (docs/scale.md). A [`Name`] is the index of its text in one process-wide
//! table, so a triple is 16 bytes. The table only grows: a name's text lives as long as
//! the process, which a server that loads new generations pays only for the names it has
//! not seen before.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{LazyLock, Mutex};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable string, interned: equal texts have the same id, so equality, cloning
/// and storage cost a `u32`; serialised as a plain string.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Name(u32);

/// Every name's text, by id. Lookups read `texts` without a lock (an append-only vector
/// whose entries never move); interning a new text takes `ids`' lock, held only for the
/// lookup and the append.
struct Table {
    ids: Mutex<HashMap<&'static str, u32>>,
    texts: boxcar::Vec<&'static str>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| Table { ids: Mutex::default(), texts: boxcar::Vec::new() });

impl Name {
    /// `s`, interned: the id of an equal text given before, or a new one.
    pub fn new(s: &str) -> Name {
        let mut ids = TABLE.ids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = ids.get(s) {
            return Name(id);
        }
        let text: &'static str = Box::leak(s.into());
        let id = u32::try_from(TABLE.texts.push(text)).expect("fewer than 2^32 distinct names");
        ids.insert(text, id);
        Name(id)
    }

    /// The name's id: equal for equal texts, within a process.
    pub fn id(self) -> u32 {
        self.0
    }

    pub fn as_str(&self) -> &'static str {
        TABLE.texts[self.0 as usize]
    }
}

/// Distinct names interned by this process.
pub fn interned() -> usize {
    TABLE.texts.count()
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

// `Borrow<str>` asks that a name hash and compare as its text does.
impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By text, as the strings they replace were ordered.
impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        if self.0 == other.0 {
            return std::cmp::Ordering::Equal;
        }
        self.as_str().cmp(other.as_str())
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name::new(&s)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Name, E> {
                Ok(Name::new(s))
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_are_one_name_and_serialise_as_their_text() {
        let json = r#"["Paris", "capital of", "Paris", "Paris"]"#;
        let names: Vec<Name> = serde_json::from_str(json).unwrap();
        assert_eq!(names[0], "Paris");
        assert_eq!((names[0].0, names[0].0), (names[2].0, names[3].0), "one id for one text");
        assert_ne!(names[0].0, names[1].0);
        assert_eq!(Name::from("Paris".to_string()), names[0]);
        assert_eq!(serde_json::to_string(&names).unwrap(), json.replace(", ", ","));
        assert_eq!(std::mem::size_of::<Name>(), 4);
    }

    #[test]
    fn names_order_and_hash_as_their_texts() {
        use std::collections::HashSet;
        let (b, a) = (Name::new("b-order-test"), Name::new("a-order-test"));
        assert!(a < b, "by text, not by id");
        let mut sorted = vec![b, a, b];
        sorted.sort();
        assert_eq!(sorted, [a, b, b]);
        let set: HashSet<Name> = [a, b].into_iter().collect();
        assert!(set.contains("a-order-test"), "looked up by its text (Borrow<str>)");
    }

    #[test]
    fn names_interned_from_many_threads_agree() {
        let ids: Vec<Vec<Name>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..500).map(|i| Name::new(&format!("threaded-{}", i % 50))).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|v| v == &ids[0]));
        assert_eq!(ids[0][7].as_str(), "threaded-7");
    }
}
