//! Interned names: the strings a graph repeats millions of times (a triple's subject,
//! predicate and object: a few thousand entity names and predicates stated by millions of
//! triples) held once each and shared.
//!
//! A triple's three owned `String`s were three allocations and 72 bytes of headers; a
//! [`Name`] is a shared pointer (16 bytes) to one copy of the text. Names read back from
//! a stored graph share their copies when the read runs inside [`interning`]; built ones
//! when they come from one [`Interner`].

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable, cheaply cloned string; serialised as a plain string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<str>);

impl Name {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name(s.into())
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(s.into())
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
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
                Ok(ACTIVE.with(|a| match a.borrow_mut().as_mut() {
                    Some(interner) => interner.name(s),
                    None => Name::from(s),
                }))
            }
        }
        d.deserialize_str(Text)
    }
}

/// One copy of each distinct name given.
#[derive(Default)]
pub struct Interner {
    names: HashSet<Arc<str>>,
}

impl Interner {
    /// `s` as a name, sharing the copy of an equal name given before.
    pub fn name(&mut self, s: &str) -> Name {
        if let Some(a) = self.names.get(s) {
            return Name(a.clone());
        }
        let a: Arc<str> = s.into();
        self.names.insert(a.clone());
        Name(a)
    }

    /// Distinct names held.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

thread_local! {
    /// The interner that names deserialised on this thread go through, inside
    /// [`interning`].
    static ACTIVE: RefCell<Option<Interner>> = const { RefCell::new(None) };
}

/// Runs `f` (a deserialisation on this thread) with every [`Name`] it reads interned:
/// equal names share one copy.
pub fn interning<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(Option<Interner>);
    impl Drop for Reset {
        fn drop(&mut self) {
            ACTIVE.with(|a| *a.borrow_mut() = self.0.take());
        }
    }
    let previous = ACTIVE.with(|a| a.borrow_mut().replace(Interner::default()));
    let _reset = Reset(previous);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_inside_interning_share_one_copy() {
        let json = r#"["Paris", "capital of", "Paris", "Paris"]"#;
        let names: Vec<Name> = interning(|| serde_json::from_str(json)).unwrap();
        assert_eq!(names[0], "Paris");
        assert!(Arc::ptr_eq(&names[0].0, &names[2].0) && Arc::ptr_eq(&names[0].0, &names[3].0));
        assert!(!Arc::ptr_eq(&names[0].0, &names[1].0));
        // Outside, each is its own copy; the text and the serialised form are the same.
        let plain: Vec<Name> = serde_json::from_str(json).unwrap();
        assert!(!Arc::ptr_eq(&plain[0].0, &plain[2].0));
        assert_eq!(plain, names);
        assert_eq!(serde_json::to_string(&names).unwrap(), json.replace(", ", ","));
        // An interner shares what it was given.
        let mut i = Interner::default();
        let (a, b) = (i.name("x"), i.name("x"));
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(i.len(), 1);
        // Nested interning restores the outer interner.
        interning(|| {
            let _: Vec<Name> = interning(|| serde_json::from_str(json)).unwrap();
            let v: Vec<Name> = serde_json::from_str(json).unwrap();
            assert!(Arc::ptr_eq(&v[0].0, &v[2].0), "the outer interner is active again");
        });
    }
}
