//! The precomputation's byte format: [`Solved`] as it is stored with the graph.

use super::solve::{Solved, BLOCK};

/// The first bytes of a stored [`Solved`], and its layout's version: a solve's (no
/// per-node bound; every fresh build writes this one, so its bytes are as before).
pub(super) const SOLVED_MAGIC: &[u8; 8] = b"hrgwalk1";

/// The layout of a locally repaired walk: [`SOLVED_MAGIC`]'s, with each column's per-node
/// bound (`ε`, f64) after the changes.
pub(super) const REPAIRED_MAGIC: &[u8; 8] = b"hrgwalk2";

impl Solved {
    /// Little-endian: the magic, five u64 (entities, passages, dim, iterations, block),
    /// the damping and the seconds (f64), then the changes, the per-node bounds where any
    /// is not 0 (the second magic), and the values (f64).
    pub fn to_bytes(&self) -> Vec<u8> {
        assert!(self.pending.is_empty(), "a deferred walk is served, never stored");
        let local = self.node_error.iter().any(|&x| x != 0.0);
        let node: &[f64] = if local { &self.node_error } else { &[] };
        let mut out = Vec::with_capacity(8 * (9 + self.change.len() + node.len() + self.values.len()));
        out.extend_from_slice(if local { REPAIRED_MAGIC } else { SOLVED_MAGIC });
        for n in [self.entities, self.passages, self.dim, self.iterations, BLOCK] {
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        for x in [self.damping, self.secs].iter().chain(&self.change).chain(node).chain(&self.values) {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Reads [`Solved::to_bytes`]'s layouts back, or says what is wrong with them.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Solved, String> {
        let (body, local) = match bytes.strip_prefix(SOLVED_MAGIC.as_slice()) {
            Some(body) => (body, false),
            None => (bytes.strip_prefix(REPAIRED_MAGIC.as_slice()).ok_or("not a stored walk (bad magic)")?, true),
        };
        if body.len() % 8 != 0 || body.len() < 7 * 8 {
            return Err(format!("{} bytes is not a stored walk's length", bytes.len()));
        }
        let words: Vec<[u8; 8]> = body.chunks_exact(8).map(|c| c.try_into().expect("8 bytes")).collect();
        let n = |i: usize| u64::from_le_bytes(words[i]) as usize;
        let (entities, passages, dim, iterations, block) = (n(0), n(1), n(2), n(3), n(4));
        if block != BLOCK {
            return Err(format!("stored in blocks of {block} columns, this version uses {BLOCK}"));
        }
        let floats: Vec<f64> = words[5..].iter().map(|w| f64::from_le_bytes(*w)).collect();
        let columns = dim.checked_add(1).ok_or("impossible size")?;
        let heads = if local { 2 * columns } else { columns };
        let want = entities.checked_mul(columns).and_then(|v| v.checked_add(2 + heads)).ok_or("impossible size")?;
        if floats.len() != want {
            return Err(format!(
                "{} values for {entities} entities of dimension {dim} ({want} expected)",
                floats.len()
            ));
        }
        let change = floats[2..2 + columns].to_vec();
        let node_error = if local { floats[2 + columns..2 + heads].to_vec() } else { vec![0.0; columns] };
        if node_error.iter().any(|x| !(x.is_finite() && *x >= 0.0)) {
            return Err("a per-node bound that is not a finite non-negative number".into());
        }
        Ok(Solved {
            entities,
            passages,
            dim,
            damping: floats[0],
            iterations,
            secs: floats[1],
            change,
            node_error,
            values: floats[2 + heads..].to_vec(),
            pending: Default::default(),
        })
    }
}
