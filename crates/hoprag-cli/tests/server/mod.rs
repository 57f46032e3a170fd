//! What the tests of `hoprag serve` share: the binary without a usable LLM, an index of
//! the demo corpus built once per test binary, and a server on a loopback port.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use reqwest::blocking::Client;

pub const TOKEN: &str = "s3cret-from-env";

/// The binary, with no LLM it can use: no endpoint, and a local model file that is not
/// there. The LLM methods then fail the same way in the CLI and the server (answering
/// every question with the local model would take minutes; the LLM paths have their own
/// tests).
pub fn hoprag_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hoprag"));
    command
        .env("HOPRAG_LLM_LOCAL", "/nonexistent/hoprag-test-model.gguf")
        .env_remove("HOPRAG_LLM_MODEL")
        .env_remove("HOPRAG_LLM_BASE_URL");
    command
}

pub fn hoprag(args: &[&str]) -> Output {
    hoprag_command().args(args).output().expect("run hoprag")
}

pub fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo")
}

/// A fresh copy, in `dir`, of an index of the demo corpus that is embedded once per
/// test run (the tests write into their copies).
pub fn demo_index(dir: &Path) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let idx = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-demo-index");
        let _ = std::fs::remove_dir_all(&idx);
        let corpus = demo().join("corpus.jsonl");
        let o = hoprag(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        idx
    });
    let copy = dir.join("idx");
    copy_tree(built, &copy);
    copy
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A running `hoprag serve`, its address, and its stderr (the request log) as it comes.
pub struct Server {
    pub child: Child,
    pub base: String,
    log: Arc<Mutex<String>>,
    drain: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(index: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["serve", "--index", index.to_str().unwrap(), "--addr", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = hoprag_command()
            .args(&args)
            .env("HOPRAG_TOKEN", TOKEN)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start hoprag serve");
        let log = Arc::new(Mutex::new(String::new()));
        let (sink, mut stderr) = (log.clone(), child.stderr.take().unwrap());
        // Drained as it comes, so that a full pipe never blocks the server.
        let drain = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("listening on ").unwrap_or_else(|| {
            let _ = child.wait();
            panic!("unexpected first line {line:?}; stderr: {}", log.lock().unwrap())
        });
        Server { child, base: addr.to_string(), log, drain: Some(drain) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Everything the server wrote to stderr, once it has exited.
    pub fn final_log(&mut self) -> String {
        if let Some(drain) = self.drain.take() {
            drain.join().unwrap();
        }
        self.log.lock().unwrap().clone()
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let killed = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("server log:\n{}", self.log.lock().unwrap());
        }
    }
}

pub fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(300)).build().unwrap()
}
