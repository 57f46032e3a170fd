//! Corpus file formats.
//!
//! | format | shape |
//! |---|---|
//! | JSON list (HippoRAG) | `[{"title": .., "text": .., "id"?, "doc"?, "meta"?}, ..]` |
//! | JSONL | one `{"title", "text", "id"?, "doc"?, "meta"?}` object per line |
//! | HotpotQA corpus | `{"title": ["sentence", ..], ..}` (a passage is its sentences joined) |
//! | folder | `.txt` / `.md` files, split into passages on sentence boundaries; a file is a document |
//!
//! `doc` names the document a passage belongs to (an upsert replaces a document's
//! passages together); `meta` is any JSON object, returned with the passage.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::split::{split_document, SplitOptions};
use super::{Dedup, LoadedCorpus, Passage, Skipped};
use crate::error::{Error, Result};
use crate::text::join_sentences;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorpusFormat {
    JsonList,
    Jsonl,
    HotpotQa,
    Folder,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CorpusOptions {
    /// Force a format instead of detecting it from the path and content.
    pub format: Option<CorpusFormat>,
    /// Passages longer than this (in bytes of title + text) are skipped with a warning:
    /// nothing that long is a passage, and embedders only read the first 256 tokens.
    /// Put long documents in a folder instead, where they are split.
    pub max_passage_bytes: usize,
    /// How folder documents are split.
    pub split: SplitOptions,
}

impl Default for CorpusOptions {
    fn default() -> Self {
        CorpusOptions { format: None, max_passage_bytes: 1 << 20, split: SplitOptions::default() }
    }
}

/// Loads a corpus file or folder. Entries that cannot be used are skipped and listed in
/// the report; an unreadable source (missing file, invalid JSON document) or one id given
/// to two different passages is an error.
pub fn load_corpus(path: &Path, options: &CorpusOptions) -> Result<LoadedCorpus> {
    let format = match options.format {
        Some(f) => f,
        None => detect_format(path)?,
    };
    let mut corpus = LoadedCorpus::default();
    let mut seen = Dedup::default();
    load_into(path, format, options, &mut corpus, &mut seen)?;
    Ok(corpus)
}

/// Passages given in memory rather than in a file (the Python API's lists, HTTP bodies):
/// each entry is an object `{title, text, id?, doc?, meta?}` as in a JSON list corpus,
/// checked and reported the same way, with locations `SOURCE[i]`.
pub fn load_entries(source: &str, entries: &[Value], options: &CorpusOptions) -> Result<LoadedCorpus> {
    let mut corpus = LoadedCorpus::default();
    let mut seen = Dedup::default();
    let file = Path::new(source);
    let mut sink = Sink { corpus: &mut corpus, seen: &mut seen, options, file };
    for (i, entry) in entries.iter().enumerate() {
        sink.add_object(&format!("[{i}]"), entry)?;
    }
    Ok(corpus)
}

/// Like [`load_corpus`], checking duplicates against passages already indexed.
pub(crate) fn load_into(
    path: &Path,
    format: CorpusFormat,
    options: &CorpusOptions,
    corpus: &mut LoadedCorpus,
    seen: &mut Dedup,
) -> Result<()> {
    let mut sink = Sink { corpus, seen, options, file: path };
    match format {
        CorpusFormat::JsonList => load_json_list(path, &mut sink),
        CorpusFormat::Jsonl => load_jsonl(path, &mut sink),
        CorpusFormat::HotpotQa => load_hotpotqa(path, &mut sink),
        CorpusFormat::Folder => load_folder(path, &mut sink),
    }
}

fn detect_format(path: &Path) -> Result<CorpusFormat> {
    let meta = fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Ok(CorpusFormat::Folder);
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "jsonl" | "ndjson" => return Ok(CorpusFormat::Jsonl),
        "txt" | "md" => return Ok(CorpusFormat::Folder),
        _ => {}
    }
    // A .json file: the first non-blank byte tells a list from an object.
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => Ok(CorpusFormat::JsonList),
        Some(b'{') if ext == "json" => Ok(CorpusFormat::HotpotQa),
        Some(b'{') => Ok(CorpusFormat::Jsonl),
        _ => Err(Error::input(
            path,
            "cannot tell the corpus format: expected a JSON list `[{title, text}]`, JSONL, \
             a JSON object `{title: [sentences]}` or a folder of .txt/.md files",
        )),
    }
}

/// Where loaders put passages; applies the checks every format shares.
struct Sink<'a> {
    corpus: &'a mut LoadedCorpus,
    seen: &'a mut Dedup,
    options: &'a CorpusOptions,
    file: &'a Path,
}

impl Sink<'_> {
    fn location(&self, entry: &str) -> String {
        format!("{}{entry}", self.file.display())
    }

    fn skip(&mut self, entry: &str, reason: impl Into<String>) {
        let location = self.location(entry);
        self.corpus.report.skipped.push(Skipped { location, reason: reason.into() });
    }

    fn add(&mut self, entry: &str, id: Option<String>, title: String, text: String, extra: Extra) -> Result<()> {
        self.corpus.report.entries += 1;
        let text = text.trim().to_string();
        let title = title.trim().to_string();
        if text.is_empty() {
            self.skip(entry, "passage has no text");
            return Ok(());
        }
        let size = title.len() + text.len();
        if size > self.options.max_passage_bytes {
            self.skip(
                entry,
                format!(
                    "passage is {size} bytes, over the limit of {} (max_passage_bytes); \
                     put long documents in a folder corpus to have them split",
                    self.options.max_passage_bytes
                ),
            );
            return Ok(());
        }
        // PostgreSQL stores no NUL in text or JSON: refused in every store alike, so that an
        // index moves between stores and a corpus means the same everywhere.
        let with_nul =
            [("id", id.as_deref()), ("doc", extra.doc.as_deref()), ("title", Some(&title)), ("text", Some(&text))]
                .into_iter()
                .find(|(_, v)| v.is_some_and(|v| v.contains('\0')))
                .map(|(field, _)| field)
                .or_else(|| extra.meta.as_ref().filter(|m| json_has_nul(&Value::Object((*m).clone()))).map(|_| "meta"));
        if let Some(field) = with_nul {
            self.skip(entry, format!("`{field}` holds a NUL character (U+0000), which no store keeps"));
            return Ok(());
        }
        let id = id.unwrap_or_else(|| Passage::content_id(&title, &text));
        let location = self.location(entry);
        self.corpus.push(self.seen, Passage { id, title, text, doc: extra.doc, meta: extra.meta }, location)
    }

    /// An entry of the JSON list / JSONL formats.
    fn add_object(&mut self, entry: &str, value: &Value) -> Result<()> {
        let Some(obj) = value.as_object() else {
            self.corpus.report.entries += 1;
            self.skip(entry, format!("expected an object {{title, text}}, found {}", kind(value)));
            return Ok(());
        };
        let field = |name: &str| -> Result<Option<String>, String> {
            match obj.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(format!("field `{name}` must be a string, found {}", kind(other))),
            }
        };
        let id_field = |name: &str| match obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Err(format!("field `{name}` is empty")),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(other) => Err(format!("field `{name}` must be a string or number, found {}", kind(other))),
        };
        let meta = match obj.get("meta") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m.clone())),
            Some(other) => Err(format!("field `meta` must be an object, found {}", kind(other))),
        };
        let parsed =
            (|| Ok::<_, String>((id_field("id")?, field("title")?, field("text")?, id_field("doc")?, meta?)))();
        match parsed {
            Ok((_, _, None, _, _)) => {
                self.corpus.report.entries += 1;
                self.skip(entry, "missing field `text`");
                Ok(())
            }
            Ok((id, title, Some(text), doc, meta)) => {
                self.add(entry, id, title.unwrap_or_default(), text, Extra { doc, meta })
            }
            Err(reason) => {
                self.corpus.report.entries += 1;
                self.skip(entry, reason);
                Ok(())
            }
        }
    }
}

/// Whether a JSON value holds a NUL character in a string or a key.
fn json_has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(json_has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || json_has_nul(v)),
        _ => false,
    }
}

/// What a passage may carry besides its id, title and text.
#[derive(Default)]
struct Extra {
    doc: Option<String>,
    meta: Option<super::Meta>,
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let file = fs::File::open(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_reader(BufReader::new(file)).map_err(|e| Error::input(path, format!("invalid JSON: {e}")))
}

fn load_json_list(path: &Path, sink: &mut Sink) -> Result<()> {
    let Value::Array(items) = read_json(path)? else {
        return Err(Error::input(path, "expected a JSON list of passages `[{title, text}]`"));
    };
    for (i, item) in items.iter().enumerate() {
        sink.add_object(&format!("[{i}]"), item)?;
    }
    Ok(())
}

fn load_jsonl(path: &Path, sink: &mut Sink) -> Result<()> {
    let file = fs::File::open(path).map_err(|e| Error::io(path, e))?;
    for (i, line) in BufReader::new(file).split(b'\n').enumerate() {
        let entry = format!(":{}", i + 1);
        let line = line.map_err(|e| Error::io(path, e))?;
        let Ok(line) = std::str::from_utf8(&line) else {
            sink.corpus.report.entries += 1;
            sink.skip(&entry, "line is not valid UTF-8");
            continue;
        };
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(value) => sink.add_object(&entry, &value)?,
            Err(e) => {
                sink.corpus.report.entries += 1;
                sink.skip(&entry, format!("invalid JSON: {e}"));
            }
        }
    }
    Ok(())
}

fn load_hotpotqa(path: &Path, sink: &mut Sink) -> Result<()> {
    let Value::Object(map) = read_json(path)? else {
        return Err(Error::input(path, "expected a JSON object {title: [sentences]}"));
    };
    for (title, value) in &map {
        let entry = format!("[{title:?}]");
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Array(parts) => {
                let strings: Option<Vec<&str>> = parts.iter().map(Value::as_str).collect();
                match strings {
                    Some(s) => join_sentences(&s),
                    None => {
                        sink.corpus.report.entries += 1;
                        sink.skip(&entry, "sentences must all be strings");
                        continue;
                    }
                }
            }
            other => {
                sink.corpus.report.entries += 1;
                sink.skip(&entry, format!("expected a list of sentences, found {}", kind(other)));
                continue;
            }
        };
        sink.add(&entry, None, title.clone(), text, Extra::default())?;
    }
    Ok(())
}

fn load_folder(root: &Path, sink: &mut Sink) -> Result<()> {
    let mut files = Vec::new();
    if root.is_file() {
        files.push(root.to_path_buf());
    } else {
        collect_files(root, &mut files)?;
    }
    files.sort();
    let base = if root.is_file() { root.parent().unwrap_or(Path::new("")) } else { root };
    for file in files {
        let rel = file.strip_prefix(base).unwrap_or(&file).to_string_lossy().replace('\\', "/");
        let bytes = fs::read(&file).map_err(|e| Error::io(&file, e))?;
        let file_sink_entry = format!("/{rel}");
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                sink.corpus.report.entries += 1;
                let at = e.utf8_error().valid_up_to();
                sink.skip(&file_sink_entry, format!("not valid UTF-8 (first bad byte at offset {at}); file skipped"));
                continue;
            }
        };
        let (title, body) = title_and_body(&file, &text);
        let chunks = split_document(body, &sink.options.split);
        if chunks.is_empty() {
            sink.corpus.report.entries += 1;
            sink.skip(&file_sink_entry, "file has no text");
        }
        for (n, chunk) in chunks.into_iter().enumerate() {
            let entry = format!("/{rel}#{n}");
            let extra = Extra { doc: Some(rel.clone()), meta: None };
            sink.add(&entry, Some(format!("{rel}#{n}")), title.clone(), chunk, extra)?;
        }
    }
    Ok(())
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.is_dir() {
            collect_files(&path, out)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref(),
            Some("txt" | "md")
        ) {
            out.push(path);
        }
    }
    Ok(())
}

/// A Markdown file's first `# ` heading is its title; otherwise the file stem is.
fn title_and_body<'a>(file: &Path, text: &'a str) -> (String, &'a str) {
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let trimmed = text.trim_start();
    if let Some(rest) = trimmed.strip_prefix("# ") {
        let (heading, body) = rest.split_once('\n').unwrap_or((rest, ""));
        return (heading.trim().to_string(), body);
    }
    (stem, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    #[test]
    fn json_list_with_bad_entries_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "c.json",
            br#"[{"title":"A","text":"alpha"},{"title":"B"},{"title":3,"text":"x"},"str",
                 {"title":"A","text":"alpha"},{"title":"C","text":"  "}]"#,
        );
        let c = load_corpus(&p, &CorpusOptions::default()).unwrap();
        assert_eq!(c.passages.len(), 1);
        assert_eq!(c.report.entries, 6);
        let reasons: Vec<_> = c.report.skipped.iter().map(|s| (s.location.clone(), s.reason.clone())).collect();
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert!(reasons[0].0.ends_with("c.json[1]") && reasons[0].1.contains("missing field `text`"));
        assert!(reasons[1].0.ends_with("c.json[2]") && reasons[1].1.contains("`title` must be a string"));
        assert!(reasons[2].0.ends_with("c.json[3]") && reasons[2].1.contains("expected an object"));
        assert!(reasons[3].0.ends_with("c.json[5]") && reasons[3].1.contains("no text"));
        assert_eq!(c.report.duplicates.len(), 1);
        assert!(c.report.duplicates[0].location.ends_with("c.json[4]"));
    }

    #[test]
    fn invalid_json_is_an_error_naming_file_and_position() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "broken.json", b"[{\"title\": \"A\", \"text\": \"x\"},\n {\"title\": }]");
        let err = load_corpus(&p, &CorpusOptions::default()).unwrap_err().to_string();
        assert!(err.contains("broken.json") && err.contains("line 2"), "{err}");
    }

    #[test]
    fn jsonl_bad_lines_are_skipped_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "c.jsonl",
            b"{\"id\":\"x1\",\"title\":\"A\",\"text\":\"one\"}\n{not json}\n\n{\"id\":7,\"title\":\"B\",\"text\":\"two\"}\n\xff\xfe\n",
        );
        let c = load_corpus(&p, &CorpusOptions::default()).unwrap();
        assert_eq!(c.passages.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["x1", "7"]);
        assert_eq!(c.report.skipped.len(), 2);
        assert!(c.report.skipped[0].location.ends_with("c.jsonl:2"));
        assert!(c.report.skipped[1].location.ends_with("c.jsonl:5"));
        assert!(c.report.skipped[1].reason.contains("UTF-8"));
    }

    #[test]
    fn a_nul_character_is_refused_naming_its_field() {
        let entries = vec![
            serde_json::json!({"title": "a", "text": "x\u{0}y"}),
            serde_json::json!({"text": "fine", "meta": {"k": ["v\u{0}"]}}),
            serde_json::json!({"text": "kept"}),
        ];
        let c = load_entries("passages", &entries, &CorpusOptions::default()).unwrap();
        let reasons: Vec<&str> = c.report.skipped.iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(c.passages.len(), 1);
        assert!(reasons[0].contains("`text` holds a NUL") && reasons[1].contains("`meta` holds a NUL"), "{reasons:?}");
    }

    #[test]
    fn oversized_passage_is_skipped_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let big = "word ".repeat(2 * 1024 * 1024); // 10 MB
        let body = format!("[{{\"title\":\"Big\",\"text\":\"{big}\"}},{{\"title\":\"S\",\"text\":\"small\"}}]");
        let p = write(dir.path(), "big.json", body.as_bytes());
        let c = load_corpus(&p, &CorpusOptions::default()).unwrap();
        assert_eq!(c.passages.len(), 1);
        assert_eq!(c.report.skipped.len(), 1);
        assert!(c.report.skipped[0].location.ends_with("big.json[0]"));
        assert!(c.report.skipped[0].reason.contains("over the limit"));
    }

    #[test]
    fn hotpotqa_object_joins_sentences() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "h.json", br#"{"Varn": ["Varn is a town.", " It has a river."], "Bad": [1, 2]}"#);
        let c = load_corpus(&p, &CorpusOptions::default()).unwrap();
        assert_eq!(c.passages.len(), 1);
        assert_eq!(c.passages[0].text, "Varn is a town. It has a river.");
        assert_eq!(c.report.skipped.len(), 1);
        assert!(c.report.skipped[0].location.contains("\"Bad\""));
    }

    #[test]
    fn folder_splits_documents_and_skips_invalid_utf8() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.md", b"# Varn River\nThe Varn rises in the hills. It flows east to the sea.");
        fs::create_dir(dir.path().join("sub")).unwrap();
        write(&dir.path().join("sub"), "b.txt", b"Plain text file. Second sentence.");
        write(dir.path(), "bad.txt", b"ok then \xff\xfe broken");
        write(dir.path(), "ignored.csv", b"x,y");
        let c = load_corpus(dir.path(), &CorpusOptions::default()).unwrap();
        assert_eq!(c.passages.len(), 2);
        assert_eq!(c.passages[0].id, "a.md#0");
        assert_eq!(c.passages[0].title, "Varn River");
        assert_eq!(c.passages[1].id, "sub/b.txt#0");
        assert_eq!(c.passages[1].title, "b");
        assert_eq!(c.report.skipped.len(), 1);
        assert!(c.report.skipped[0].location.ends_with("/bad.txt"));
        assert!(c.report.skipped[0].reason.contains("offset 8"));
    }

    #[test]
    fn content_ids_are_stable() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "c.json", br#"[{"title":"A","text":"alpha"}]"#);
        let a = load_corpus(&p, &CorpusOptions::default()).unwrap();
        let b = load_corpus(&p, &CorpusOptions::default()).unwrap();
        assert_eq!(a.passages[0].id, b.passages[0].id);
        assert_eq!(a.passages[0].id, Passage::content_id("A", "alpha"));
    }

    #[test]
    fn one_id_for_two_passages_is_an_error_naming_both_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "c.jsonl", b"{\"id\":\"a\",\"text\":\"one\"}\n{\"id\":\"a\",\"text\":\"two\"}\n");
        let err = load_corpus(&p, &CorpusOptions::default()).unwrap_err().to_string();
        assert!(err.contains("c.jsonl:2") && err.contains("c.jsonl:1") && err.contains("\"a\""), "{err}");
        // The same passage twice is kept once; the same text under two ids is two passages.
        let p = write(
            dir.path(),
            "d.jsonl",
            b"{\"id\":\"a\",\"text\":\"one\"}\n{\"id\":\"a\",\"text\":\"one\"}\n{\"id\":\"b\",\"text\":\"one\"}\n",
        );
        let c = load_corpus(&p, &CorpusOptions::default()).unwrap();
        assert_eq!(c.passages.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(c.report.duplicates.len(), 1);
    }

    #[test]
    fn documents_and_metadata_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "c.jsonl",
            b"{\"id\":\"a#0\",\"doc\":\"a\",\"text\":\"one\",\"meta\":{\"url\":\"http://x\"}}\n{\"id\":\"b\",\"text\":\"two\",\"meta\":3}\n",
        );
        let c = load_corpus(&p, &CorpusOptions::default()).unwrap();
        assert_eq!(c.passages.len(), 1);
        assert_eq!(c.passages[0].document(), "a");
        assert_eq!(c.passages[0].meta.as_ref().unwrap()["url"], "http://x");
        assert!(c.report.skipped[0].reason.contains("`meta` must be an object"), "{:?}", c.report.skipped);
        let folder = dir.path().join("f");
        fs::create_dir(&folder).unwrap();
        write(&folder, "x.md", b"# X\nSome text here.");
        let c = load_corpus(&folder, &CorpusOptions::default()).unwrap();
        assert_eq!((c.passages[0].id.as_str(), c.passages[0].document()), ("x.md#0", "x.md"));
    }
}
