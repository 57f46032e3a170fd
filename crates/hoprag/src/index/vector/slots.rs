//! The HNSW graph's keys (slots) and the passage rows they stand for.
//!
//! A generation keeps its passages in canonical order, so an edit that adds or removes
//! one shifts the row of every later passage. A graph keyed by row would have to be
//! rebuilt (or every later key renamed); a graph keyed by slot keeps its keys, and the
//! edit rewrites only this table: the kept passages' slots point at their new rows, the
//! removed passages' slots are dead, and new passages take dead slots, then new ones.
//!
//! A graph built from scratch has slot = row and stores no table; so do the indexes
//! written before slots existed.

use crate::corpus::PassageIdx;

/// The row of a dead slot: a removed passage's, not (yet) reused.
const DEAD: PassageIdx = PassageIdx::MAX;

/// The file's first bytes: the format and its version.
const MAGIC: &[u8; 8] = b"hopslot1";

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Slots {
    /// Slot → row, [`DEAD`] for a dead slot; `None`: slot = row.
    rows: Option<Vec<PassageIdx>>,
    /// Passages removed from the graph since it was built from scratch (a changed
    /// passage is removed and added): the churn the rebuild rule watches.
    removed: u64,
}

/// What an edit does to the graph: the slots it removes, then the rows it adds and under
/// which slots, and the table after it.
#[derive(Debug)]
pub(crate) struct SlotEdit {
    pub slots: Slots,
    /// Slots of the base's passages the edit removes, ascending.
    pub remove: Vec<u64>,
    /// (slot, new row) of each passage the base lacks, by row.
    pub add: Vec<(u64, PassageIdx)>,
}

impl Slots {
    /// Slot = row: a graph built from scratch.
    pub fn identity() -> Slots {
        Slots::default()
    }

    pub fn is_identity(&self) -> bool {
        self.rows.is_none()
    }

    /// The row of `slot`'s passage; `None` for a dead slot or one past the table.
    pub fn row(&self, slot: u64) -> Option<PassageIdx> {
        match &self.rows {
            None => PassageIdx::try_from(slot).ok().filter(|&r| r != DEAD),
            Some(rows) => usize::try_from(slot).ok().and_then(|s| rows.get(s)).copied().filter(|&r| r != DEAD),
        }
    }

    /// Slots a table holds, dead ones too; `None` where slot = row.
    pub fn table_len(&self) -> Option<usize> {
        self.rows.as_ref().map(Vec::len)
    }

    /// Slots that hold a passage; `None` where slot = row.
    pub fn live(&self) -> Option<usize> {
        self.rows.as_ref().map(|rows| rows.iter().filter(|&&r| r != DEAD).count())
    }

    /// Passages removed since the graph was built from scratch.
    pub fn removed(&self) -> u64 {
        self.removed
    }

    /// Slots that hold no passage.
    pub fn dead(&self) -> usize {
        self.rows.as_ref().map_or(0, |rows| rows.iter().filter(|&&r| r == DEAD).count())
    }

    /// The table as [`from_bytes`](Self::from_bytes) reads it: the magic, the removed
    /// count and the slot count (u64), then each slot's row (u32, `u32::MAX` dead), all
    /// little-endian. An identity table is stored as a table too, though none is needed.
    pub fn to_bytes(&self, passages: usize) -> Vec<u8> {
        let identity: Vec<PassageIdx>;
        let rows = match &self.rows {
            Some(rows) => rows,
            None => {
                identity = (0..passages as PassageIdx).collect();
                &identity
            }
        };
        let mut bytes = Vec::with_capacity(24 + 4 * rows.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&self.removed.to_le_bytes());
        bytes.extend_from_slice(&(rows.len() as u64).to_le_bytes());
        for r in rows {
            bytes.extend_from_slice(&r.to_le_bytes());
        }
        bytes
    }

    /// A table from [`to_bytes`](Self::to_bytes), checked against the generation's
    /// `passages`: every row below it and held by exactly one slot. The error says what
    /// is wrong, for the caller to name where the bytes came from.
    pub fn from_bytes(bytes: &[u8], passages: usize) -> Result<Slots, String> {
        let header = bytes.get(..24).ok_or_else(|| format!("{} bytes, shorter than the header", bytes.len()))?;
        if &header[..8] != MAGIC {
            return Err("not an HNSW slot table (wrong magic)".into());
        }
        let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("eight bytes"));
        let (removed, count) = (word(8), word(16));
        let body = &bytes[24..];
        if Some(body.len() as u64) != count.checked_mul(4) {
            return Err(format!("{count} slots in the header, {} bytes of rows", body.len()));
        }
        let rows: Vec<PassageIdx> =
            body.chunks_exact(4).map(|c| PassageIdx::from_le_bytes(c.try_into().expect("four bytes"))).collect();
        let mut seen = vec![false; passages];
        for (slot, &r) in rows.iter().enumerate().filter(|(_, &r)| r != DEAD) {
            match seen.get_mut(r as usize) {
                Some(s) if !*s => *s = true,
                Some(_) => return Err(format!("row {r} is held by two slots (the second is slot {slot})")),
                None => return Err(format!("slot {slot} holds row {r}, past the {passages} passages")),
            }
        }
        if let Some(r) = seen.iter().position(|s| !s) {
            return Err(format!("no slot holds row {r} of the {passages} passages"));
        }
        Ok(Slots { rows: Some(rows), removed })
    }

    /// The table after an edit of a base of `base` passages whose new passages are
    /// `kept` (each one's base row, `None` for one the base lacks).
    pub(crate) fn after_edit(&self, base: usize, kept: &[Option<PassageIdx>]) -> Result<SlotEdit, String> {
        self.edit(base, kept, None)
    }

    /// [`after_edit`](Self::after_edit) for a graph other generations still read: new
    /// passages take new slots from `first` on, never a dead one (another generation may
    /// still map it).
    pub(crate) fn after_edit_appending(
        &self,
        base: usize,
        kept: &[Option<PassageIdx>],
        first: u64,
    ) -> Result<SlotEdit, String> {
        self.edit(base, kept, Some(first))
    }

    fn edit(&self, base: usize, kept: &[Option<PassageIdx>], first_new: Option<u64>) -> Result<SlotEdit, String> {
        let mut rows: Vec<PassageIdx> = match &self.rows {
            Some(rows) => rows.clone(),
            None => (0..base as PassageIdx).collect(),
        };
        let mut slot_of = vec![u64::MAX; base];
        for (slot, &r) in rows.iter().enumerate().filter(|(_, &r)| r != DEAD) {
            *slot_of.get_mut(r as usize).ok_or_else(|| format!("slot {slot} holds row {r} of {base} passages"))? =
                slot as u64;
        }
        if let Some(r) = slot_of.iter().position(|&s| s == u64::MAX) {
            return Err(format!("no slot holds row {r} of the base's {base} passages"));
        }
        // Every slot is freed, then the kept passages' slots point at their new rows.
        rows.fill(DEAD);
        let mut kept_count = 0usize;
        for (new, old) in kept.iter().enumerate().filter_map(|(j, k)| Some((j, (*k)?))) {
            let slot = *slot_of.get(old as usize).ok_or_else(|| format!("kept row {old} of {base} passages"))?;
            match rows.get_mut(slot as usize) {
                Some(r) if *r == DEAD => *r = new as PassageIdx,
                _ => return Err(format!("base row {old} is kept twice")),
            }
            kept_count += 1;
        }
        let mut remove: Vec<u64> = Vec::with_capacity(base - kept_count);
        for &slot in &slot_of {
            if rows[slot as usize] == DEAD {
                remove.push(slot);
            }
        }
        remove.sort_unstable();
        // New passages take the lowest free slots first, so the table (and usearch,
        // which reuses a removed node for the next add) grows only by what the edit
        // adds beyond what it removes.
        let mut free = match first_new {
            Some(first) => {
                let first = usize::try_from(first).map_err(|_| format!("slot {first} past the address space"))?;
                rows.resize(rows.len().max(first), DEAD);
                Vec::new()
            }
            None => rows.iter().enumerate().filter(|(_, &r)| r == DEAD).map(|(s, _)| s as u64).collect::<Vec<_>>(),
        };
        free.reverse();
        let mut add = Vec::with_capacity(kept.len() - kept_count);
        for (new, _) in kept.iter().enumerate().filter(|(_, k)| k.is_none()) {
            let slot = free.pop().unwrap_or_else(|| {
                rows.push(DEAD);
                rows.len() as u64 - 1
            });
            rows[slot as usize] = new as PassageIdx;
            add.push((slot, new as PassageIdx));
        }
        let slots = Slots { rows: Some(rows), removed: self.removed + remove.len() as u64 };
        Ok(SlotEdit { slots, remove, add })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_keeps_slots_and_reuses_dead_ones() {
        // Base rows 0..5; the edit removes rows 1 and 3, inserts a passage before row 0
        // and one between rows 2 and 4: new order [new, 0, 2, new, 4].
        let kept = [None, Some(0), Some(2), None, Some(4)];
        let e = Slots::identity().after_edit(5, &kept).unwrap();
        assert_eq!(e.remove, vec![1, 3]);
        assert_eq!(e.add, vec![(1, 0), (3, 3)]);
        let rows: Vec<_> = (0..5).map(|s| e.slots.row(s)).collect();
        assert_eq!(rows, [Some(1), Some(0), Some(2), Some(3), Some(4)]);
        assert_eq!(e.slots.removed(), 2);

        // Then one removed and none added: a dead slot stays, and is skipped.
        let e2 = e.slots.after_edit(5, &[Some(0), Some(2), Some(3), Some(4)]).unwrap();
        assert_eq!(e2.remove, vec![0], "row 1 was in slot 0");
        assert_eq!((e2.slots.row(0), e2.slots.dead(), e2.slots.removed()), (None, 1, 3));
        assert_eq!(e2.slots.row(1), Some(0));
        // Three added: the dead slot first, then new slots past the table.
        let e3 = e2.slots.after_edit(4, &[None, Some(0), Some(1), None, Some(2), Some(3), None]).unwrap();
        assert_eq!(e3.add, vec![(0, 0), (5, 3), (6, 6)]);
        assert_eq!(e3.slots.dead(), 0);

        let bytes = e3.slots.to_bytes(7);
        assert_eq!(Slots::from_bytes(&bytes, 7).unwrap(), e3.slots);
    }

    #[test]
    fn a_damaged_table_is_refused() {
        let slots = Slots::identity().after_edit(3, &[Some(0), None, Some(2)]).unwrap().slots;
        let bytes = slots.to_bytes(3);
        assert!(Slots::from_bytes(&bytes, 4).unwrap_err().contains("no slot holds row 3"));
        assert!(Slots::from_bytes(&bytes, 2).unwrap_err().contains("past the 2 passages"));
        assert!(Slots::from_bytes(&bytes[..bytes.len() - 1], 3).unwrap_err().contains("bytes of rows"));
        assert!(Slots::from_bytes(b"nonsense", 3).unwrap_err().contains("shorter than the header"));
        let mut twice = bytes.clone();
        twice[28..32].copy_from_slice(&0u32.to_le_bytes());
        assert!(Slots::from_bytes(&twice, 3).unwrap_err().contains("two slots"));
    }
}
