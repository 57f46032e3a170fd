//! A graph's files in a generation's folder: its table, the vectors of its entities and
//! facts, and the passage seeds' walk.
//!
//! The vector files are shared along a line of generations, so that an edit writes the
//! vectors it brings and not the hundreds of MB it keeps: an edit's generation links its
//! base's files, appends the rows whose text is new, and lists where each of its rows
//! lies (a `.rows` file: the file's length in rows when written, then one row number per
//! entity or fact). A file is only ever appended to, so a generation's rows stay as they
//! were for its readers, maps included. Once more than half of a file is rows no
//! generation of the line still uses, the next edit writes a new file of its own rows, in
//! order (as a fresh build does).
//!
//! The table is binary (postcard); graphs written before keep their `graph.json`, and
//! folders without `.rows` files hold their rows in order, one file row per row.

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use super::split_ppr::Solved;
use super::EntityGraph;
use crate::error::{Error, Result};
use crate::files::write_file;
use crate::index::{Matrix, Pieces, Source};

const TABLE: &str = "graph.bin";
/// The table as graphs written before the binary table had it.
const TABLE_JSON: &str = "graph.json";
const ENTITY_VECTORS: &str = "entities.f32";
/// One vector per fact (named for the triples, whose vectors they were before facts
/// were shared).
const FACT_VECTORS: &str = "triples.f32";
const ROWS: &str = "rows";
/// The passage seeds' walk solved on the entities (`split_ppr::Solved`), when computed.
const WALK: &str = "walk.f64";
/// Rows a shared file may hold beyond twice the rows its newest generation uses before
/// an edit writes a new one (small graphs are cheap to write whole).
const SLACK_ROWS: usize = 4096;

/// Where a generation's rows lie in a vector file.
#[derive(Debug, PartialEq)]
struct RowsInFile {
    /// The file's length in rows when the generation was written: what a later edit
    /// appends after (anything past it was left by a writer that did not finish).
    file_rows: u32,
    /// The file row of each row.
    at: Vec<u32>,
}

impl RowsInFile {
    fn in_order(rows: usize) -> Self {
        RowsInFile { file_rows: rows as u32, at: (0..rows as u32).collect() }
    }

    fn is_in_order(&self) -> bool {
        self.at.iter().enumerate().all(|(i, &r)| r as usize == i)
    }

    fn path(dir: &Path, vectors: &str) -> std::path::PathBuf {
        dir.join(format!("{vectors}.{ROWS}"))
    }

    /// Those of the vector file `vectors` in `dir`; for a folder written without them,
    /// the file's rows in order.
    fn read(dir: &Path, vectors: &str, dim: usize) -> Result<Self> {
        let path = Self::path(dir, vectors);
        if !path.exists() {
            let file = dir.join(vectors);
            let len = fs::metadata(&file).map_err(|e| Error::io(&file, e))?.len() as usize;
            return Ok(Self::in_order(len / (4 * dim.max(1))));
        }
        let bytes = fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let values: Vec<u32> =
            bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("four bytes"))).collect();
        match values.split_first() {
            Some((&file_rows, at)) if bytes.len().is_multiple_of(4) && at.iter().all(|&r| r < file_rows) => {
                Ok(RowsInFile { file_rows, at: at.to_vec() })
            }
            _ => Err(Error::input(&path, "not a list of rows within the file's")),
        }
    }

    fn write(&self, dir: &Path, vectors: &str) -> Result<()> {
        let bytes: Vec<u8> =
            std::iter::once(self.file_rows).chain(self.at.iter().copied()).flat_map(u32::to_le_bytes).collect();
        write_file(&Self::path(dir, vectors), &bytes, false)
    }
}

/// Writes `m` as the whole vector file `name` of `dir`, its rows in order.
fn write_whole(dir: &Path, name: &str, m: &Matrix) -> Result<()> {
    let p = dir.join(name);
    let mut file = fs::File::create(&p).map_err(|e| Error::io(&p, e))?;
    m.write_le(&mut file).map_err(|e| Error::io(&p, e))?;
    RowsInFile::in_order(m.rows()).write(dir, name)
}

/// Writes the vector file `name` of `dir` as `base`'s (in `base_dir`) plus the rows of
/// `m` it lacks: `from[i]` is the row of `base` that row `i` of `m` equals, if any.
fn write_after(dir: &Path, name: &str, m: &Matrix, from: &[Option<u32>], base_dir: &Path) -> Result<()> {
    if from.len() != m.rows() {
        return write_whole(dir, name, m);
    }
    let base = RowsInFile::read(base_dir, name, m.dim())?;
    // Each row's place in the base's file, where the base has it.
    let known: Vec<Option<u32>> = from.iter().map(|f| f.and_then(|j| base.at.get(j as usize).copied())).collect();
    let new: Vec<usize> = (0..m.rows()).filter(|&i| known[i].is_none()).collect();
    let file_rows = base.file_rows as usize + new.len();
    if file_rows > 2 * m.rows() + SLACK_ROWS || file_rows > u32::MAX as usize {
        return write_whole(dir, name, m);
    }
    let (src, dst) = (base_dir.join(name), dir.join(name));
    // The rows `from` names must be the ones `base_dir` holds: a sample of them compared
    // to the bit (an edit copies its kept vectors), else the file is written whole.
    let held = Matrix::open_rows(&src, m.dim(), base.file_rows as usize).map_err(|e| Error::io(&src, e))?;
    let kept: Vec<(usize, u32)> = known.iter().enumerate().filter_map(|(i, r)| Some((i, (*r)?))).collect();
    let step = (kept.len() / 32).max(1);
    let same = held.is_some_and(|held| kept.iter().step_by(step).all(|&(i, r)| held.row(r) == m.row(i as u32)));
    if !same {
        log::warn!(
            "{}: the rows of {} are not the ones the edit kept; writing the file whole",
            dst.display(),
            src.display()
        );
        return write_whole(dir, name, m);
    }
    if fs::hard_link(&src, &dst).is_err() {
        fs::copy(&src, &dst).map_err(|e| Error::io(&dst, e))?;
    }
    let row_bytes = 4 * m.dim() as u64;
    let mut file = fs::OpenOptions::new().write(true).open(&dst).map_err(|e| Error::io(&dst, e))?;
    let end = base.file_rows as u64 * row_bytes;
    let len = file.metadata().map_err(|e| Error::io(&dst, e))?.len();
    if len < end {
        return Err(Error::index(
            &dst,
            format!("holds {} rows, its generation wrote {}", len / row_bytes, base.file_rows),
        ));
    }
    // What a writer killed before publishing appended is no generation's: dropped.
    if len > end {
        file.set_len(end).map_err(|e| Error::io(&dst, e))?;
    }
    file.seek(SeekFrom::Start(end)).map_err(|e| Error::io(&dst, e))?;
    let mut appended = Matrix::with_capacity(m.dim(), new.len());
    for &i in &new {
        appended.push(m.row(i as u32));
    }
    let mut out = std::io::BufWriter::new(file);
    appended.write_le(&mut out).and_then(|()| out.flush()).map_err(|e| Error::io(&dst, e))?;
    let mut next = base.file_rows..;
    let at = known.iter().map(|r| r.unwrap_or_else(|| next.next().expect("unbounded"))).collect();
    RowsInFile { file_rows: file_rows as u32, at }.write(dir, name)
}

/// The matrix of a graph's `rows` rows in the vector file `name` of `dir`: mapped where
/// they lie in order, gathered otherwise.
fn read_vectors(dir: &Path, name: &str, dim: usize, rows: usize) -> Result<Matrix> {
    let p = dir.join(name);
    let at = RowsInFile::read(dir, name, dim)?;
    if at.at.len() != rows {
        return Err(Error::input(&p, format!("{} rows listed for {rows} vectors", at.at.len())));
    }
    // Rows in order are mapped as they lie (only the generation's own rows).
    let mapped = if at.is_in_order() { rows } else { at.file_rows as usize };
    let file = Matrix::open_rows(&p, dim, mapped)
        .map_err(|e| Error::io(&p, e))?
        .ok_or_else(|| Error::input(&p, format!("expected {mapped} vectors of dimension {dim}")))?;
    if at.is_in_order() {
        return Ok(file);
    }
    // The rows where they lie in the file, as runs of it, unless they are scattered.
    let mut pieces = Pieces::default();
    for &r in &at.at {
        pieces.push(Source::Base, r, 1);
    }
    if !pieces.scattered() {
        return Ok(Matrix::layered(Arc::new(file), pieces, Matrix::new(dim)));
    }
    let mut m = Matrix::with_capacity(dim, rows);
    for &r in &at.at {
        m.push(file.row(r));
    }
    Ok(m)
}

impl EntityGraph {
    /// Writes the graph's files into the new folder `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        self.save_files(dir, None)
    }

    /// [`EntityGraph::save`] for a graph an edit built from the graph saved in
    /// `base_dir`: the vector files are that graph's, extended with the rows this one
    /// brings (see the module's documentation).
    pub fn save_after(&self, dir: &Path, base_dir: &Path) -> Result<()> {
        self.save_files(dir, Some(base_dir))
    }

    fn save_files(&self, dir: &Path, base_dir: Option<&Path>) -> Result<()> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let lineage = self.lineage.as_deref();
        let vectors = |name: &str, m: &Matrix, from: Option<&[Option<u32>]>| match (base_dir, from) {
            (Some(base), Some(from)) if base.join(name).is_file() => write_after(dir, name, m, from, base),
            _ => write_whole(dir, name, m),
        };
        // The table is serialised while the kernel copies the vectors into its cache.
        std::thread::scope(|scope| {
            let table = scope.spawn(|| {
                let path = dir.join(TABLE);
                let bytes = postcard::to_stdvec(self).map_err(|e| Error::input(&path, e.to_string()))?;
                write_file(&path, &bytes, false)
            });
            let entities =
                scope.spawn(|| vectors(ENTITY_VECTORS, &self.entity_vectors, lineage.map(|l| &l.entities[..])));
            vectors(FACT_VECTORS, &self.fact_vectors, lineage.map(|l| &l.facts[..]))?;
            for handle in [table, entities] {
                handle.join().map_err(|_| Error::Other("writing the graph's files panicked".into()))??;
            }
            Ok(())
        })
    }

    /// Writes the passage seeds' walk beside a graph saved in `dir`.
    pub(crate) fn save_walk(dir: &Path, walk: &Solved) -> Result<()> {
        let p = dir.join(WALK);
        fs::write(&p, walk.to_bytes()).map_err(|e| Error::io(&p, e))
    }

    pub fn load(dir: &Path, dim: usize) -> Result<EntityGraph> {
        let (path, table) = (dir.join(TABLE), dir.join(TABLE_JSON));
        let mut g: EntityGraph = if path.exists() {
            let bytes = fs::read(&path).map_err(|e| Error::io(&path, e))?;
            postcard::from_bytes(&bytes).map_err(|e| Error::input(&path, format!("invalid graph: {e}")))?
        } else {
            let file = fs::File::open(&table).map_err(|e| Error::io(&table, e))?;
            serde_json::from_reader(std::io::BufReader::new(file))
                .map_err(|e| Error::input(&table, format!("invalid graph: {e}")))?
        };
        g.entity_vectors = Arc::new(read_vectors(dir, ENTITY_VECTORS, dim, g.entities.len())?);
        let facts = g.triple_facts.iter().max().map_or(g.triples.len(), |&f| f as usize + 1);
        g.fact_vectors = Arc::new(read_vectors(dir, FACT_VECTORS, dim, facts)?);
        let walk = dir.join(WALK);
        if walk.exists() {
            let bytes = fs::read(&walk).map_err(|e| Error::io(&walk, e))?;
            g.walk = Some(Arc::new(Solved::from_bytes(&bytes).map_err(|e| Error::input(&walk, e))?));
        }
        g.reindex().map_err(|e| Error::input(&path, format!("invalid graph: {e}")))?;
        Ok(g)
    }

    /// Checks that the graph's references fall inside an index of `passages` passages
    /// (passage ids below it) and inside its own tables (entity ids below the entity
    /// count).
    pub fn check(&self, passages: usize) -> std::result::Result<(), String> {
        let g = self;
        let entities = g.entities.len();
        if g.passage_entities.len() > passages {
            return Err(format!(
                "it lists entities for {} passages, the index holds {passages}",
                g.passage_entities.len()
            ));
        }
        if let Some(t) = g.triples.iter().find(|t| t.passage as usize >= passages) {
            return Err(format!("a triple names passage {}, the index holds {passages}", t.passage));
        }
        if g.triple_entities.len() != g.triples.len() {
            return Err(format!("{} triple entity pairs for {} triples", g.triple_entities.len(), g.triples.len()));
        }
        let bad_entity = |e: u32| e as usize >= entities;
        if g.passage_entities.iter().flatten().any(|&e| bad_entity(e))
            || g.edges.iter().any(|e| bad_entity(e.a) || bad_entity(e.b))
            || g.triple_entities.iter().flatten().any(|&(a, b)| bad_entity(a) || bad_entity(b))
        {
            return Err(format!("an entity id is out of range ({entities} entities)"));
        }
        // (Vector counts are checked as the files are read.)
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: &[f32]) -> Matrix {
        Matrix::from_flat(2, rows.iter().flat_map(|&x| [x, -x]).collect())
    }

    fn read(dir: &Path, rows: usize) -> Vec<f32> {
        read_vectors(dir, "v.f32", 2, rows).unwrap().into_flat()
    }

    #[test]
    fn a_line_of_generations_shares_one_file_and_each_reads_its_own_rows() {
        let root = tempfile::tempdir().unwrap();
        let gen = |n: usize| {
            let d = root.path().join(format!("g{n}"));
            fs::create_dir_all(&d).unwrap();
            d
        };
        let (g1, g2, g3) = (gen(1), gen(2), gen(3));
        let first = matrix(&[1.0, 2.0, 3.0]);
        write_whole(&g1, "v.f32", &first).unwrap();
        // Row 0 dropped, 3.0 kept (from row 2), two new rows.
        let second = matrix(&[3.0, 7.0, 2.0, 8.0]);
        write_after(&g2, "v.f32", &second, &[Some(2), None, Some(1), None], &g1).unwrap();
        assert_eq!(read(&g2, 4), second.as_flat());
        assert_eq!(RowsInFile::read(&g2, "v.f32", 2).unwrap(), RowsInFile { file_rows: 5, at: vec![2, 3, 1, 4] });
        // The first generation still reads its three rows (the file is shared).
        assert_eq!(fs::metadata(g1.join("v.f32")).unwrap().len(), 5 * 8);
        assert_eq!(read(&g1, 3), first.as_flat());
        // A writer killed after appending leaves rows past the file's length: the next
        // writer drops them.
        let mut f = fs::OpenOptions::new().append(true).open(g2.join("v.f32")).unwrap();
        f.write_all(&[0xff; 12]).unwrap();
        let third = matrix(&[8.0, 9.0]);
        write_after(&g3, "v.f32", &third, &[Some(3), None], &g2).unwrap();
        assert_eq!(RowsInFile::read(&g3, "v.f32", 2).unwrap(), RowsInFile { file_rows: 6, at: vec![4, 5] });
        assert_eq!(read(&g3, 2), third.as_flat());
        assert_eq!(read(&g2, 4), second.as_flat());
    }

    #[test]
    fn a_file_mostly_of_rows_no_one_uses_is_written_anew() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        let big: Vec<f32> = (0..SLACK_ROWS as u32 + 10).map(|x| x as f32).collect();
        write_whole(&a, "v.f32", &matrix(&big)).unwrap();
        let small = matrix(&[1.0, 0.5]);
        write_after(&b, "v.f32", &small, &[Some(1), None], &a).unwrap();
        assert_eq!(RowsInFile::read(&b, "v.f32", 2).unwrap(), RowsInFile::in_order(2));
        assert_eq!(read(&b, 2), small.as_flat());
        assert_eq!(read(&a, big.len()), matrix(&big).as_flat(), "its own file, the old one untouched");
    }

    #[test]
    fn rows_outside_the_file_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write_whole(dir.path(), "v.f32", &matrix(&[1.0, 2.0])).unwrap();
        RowsInFile { file_rows: 2, at: vec![0, 2] }.write(dir.path(), "v.f32").unwrap();
        let err = read_vectors(dir.path(), "v.f32", 2, 2).unwrap_err().to_string();
        assert!(err.contains("v.f32.rows"), "{err}");
        RowsInFile { file_rows: 3, at: vec![0, 2] }.write(dir.path(), "v.f32").unwrap();
        let err = read_vectors(dir.path(), "v.f32", 2, 2).unwrap_err().to_string();
        assert!(err.contains("v.f32") && err.contains("expected 3 vectors"), "{err}");
    }
}
