//! Files written for good: synced before a generation that holds them is published, and
//! shared between generations by hard links (they are never changed once written).

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

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

/// A file written as a stream and published whole: a temporary file beside the target,
/// renamed over it by [`Output::commit`] (a process killed before leaves the old file,
/// and a temporary one it left behind, `.NAME.*.tmp`), or standard output (`-`).
/// [`write_file`] takes the whole content at once; this one streams (the exports).
pub struct Output {
    writer: BufWriter<Box<dyn Write>>,
    pending: Option<Pending>,
}

struct Pending {
    file: fs::File,
    temp: tempfile::TempPath,
    target: PathBuf,
}

impl Output {
    pub fn create(target: &Path) -> Result<Output> {
        if target.as_os_str() == "-" {
            let stdout: Box<dyn Write> = Box::new(std::io::stdout());
            return Ok(Output { writer: BufWriter::with_capacity(1 << 20, stdout), pending: None });
        }
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // A temporary file is private (0600); the export is an ordinary file, whose
        // permissions the umask decides.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let temp = builder.tempfile_in(dir).map_err(|e| Error::io(target, e))?;
        let (file, temp) = temp.into_parts();
        let sink = file.try_clone().map_err(|e| Error::io(&*temp, e))?;
        Ok(Output {
            writer: BufWriter::with_capacity(1 << 20, Box::new(sink)),
            pending: Some(Pending { file, temp, target: target.to_path_buf() }),
        })
    }

    pub fn writer(&mut self) -> &mut BufWriter<Box<dyn Write>> {
        &mut self.writer
    }

    /// Flushes, syncs and renames the file over its target.
    pub fn commit(mut self) -> Result<()> {
        let Some(Pending { file, temp, target }) = self.pending.take() else {
            return self.writer.flush().map_err(|e| Error::io("-", e));
        };
        self.writer.flush().map_err(|e| Error::io(&target, e))?;
        file.sync_all().map_err(|e| Error::io(&target, e))?;
        temp.persist(&target).map_err(|e| Error::io(&target, e.error))
    }
}
