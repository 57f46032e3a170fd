//! The precomputation's byte format: [`Solved`] as it is stored with the graph.

use super::solve::{Solved, BLOCK};

/// The first bytes of a stored [`Solved`], and its layout's version.
pub(super) const SOLVED_MAGIC: &[u8; 8] = b"hrgwalk1";

impl Solved {
    /// Little-endian: the magic, five u64 (entities, passages, dim, iterations, block),
    /// the damping and the seconds (f64), then the changes and the values (f64).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 * (9 + self.change.len() + self.values.len()));
        out.extend_from_slice(SOLVED_MAGIC);
        for n in [self.entities, self.passages, self.dim, self.iterations, BLOCK] {
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        for x in [self.damping, self.secs].iter().chain(&self.change).chain(&self.values) {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Reads [`Solved::to_bytes`]'s layout back, or says what is wrong with it.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Solved, String> {
        let body = bytes.strip_prefix(SOLVED_MAGIC.as_slice()).ok_or("not a stored walk (bad magic)")?;
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
        let want = 2 + (dim + 1) + entities.checked_mul(dim + 1).ok_or("impossible size")?;
        if floats.len() != want {
            return Err(format!(
                "{} values for {entities} entities of dimension {dim} ({want} expected)",
                floats.len()
            ));
        }
        Ok(Solved {
            entities,
            passages,
            dim,
            damping: floats[0],
            iterations,
            secs: floats[1],
            change: floats[2..dim + 3].to_vec(),
            values: floats[dim + 3..].to_vec(),
        })
    }
}
