//! Files written for good: synced before a generation that holds them is published, and
//! shared between generations by hard links (they are never changed once written).

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Writes a file and syncs it; `atomic` writes a sibling temporary and renames it over the target.
pub(crate) fn write_file(path: &Path, bytes: &[u8], atomic: bool) -> Result<()> {
    let target = if atomic { path.with_extension("tmp") } else { path.to_path_buf() };
    let mut f = fs::File::create(&target).map_err(|e| Error::io(&target, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&target, e))?;
    f.sync_all().map_err(|e| Error::io(&target, e))?;
    if atomic {
        fs::rename(&target, path).map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

/// Recreates a folder tree with hard links to the files (copies where linking fails);
/// the files shared this way are never modified (tantivy's segments, a generation's files).
pub(crate) fn link_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for entry in fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let entry = entry.map_err(|e| Error::io(from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            link_tree(&src, &dst)?;
        } else if entry.file_name().to_string_lossy().ends_with(".lock") {
            continue;
        } else if fs::hard_link(&src, &dst).is_err() {
            fs::copy(&src, &dst).map_err(|e| Error::io(&dst, e))?;
        }
    }
    Ok(())
}
