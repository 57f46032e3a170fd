//! Queries side by side never hang (issue 32). Every LLM-free method, on an index whose
//! caches are cold (a new process), with more concurrent questions than cores: through
//! `hoprag eval` and through concurrent first requests to `hoprag serve` (the Python
//! binding's batched `retrieve` has its own test in crates/hoprag-py).
//!
//! The hang this guards against was a rayon worker holding a lock while it waited on
//! the pool, then running another question that wanted the same lock. It needs a graph
//! large enough for the walk's precomputation to run in parallel, so these tests use the
//! musique-train corpus; each method runs in several new processes, with 2 and 3 rayon
//! threads, so that the interleaving is likely rather than lucky. A watchdog turns a
//! hang into a failure with every thread's stack: a process that has used no CPU for
//! `STALLED` while work is outstanding is deadlocked.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const METHODS: [&str; 8] = ["bm25", "dense", "hybrid", "ppr", "auto", "phasegraph", "regime_router", "naive_ge"];
/// No CPU used for this long, with work outstanding: deadlocked.
const STALLED: Duration = Duration::from_secs(30);
/// A bound on any one run, hung or not, so that CI never waits for ever.
const LIMIT: Duration = Duration::from_secs(900);

fn hoprag_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hoprag"));
    command
        .env("HOPRAG_LLM_LOCAL", "/nonexistent/hoprag-test-model.gguf")
        .env_remove("HOPRAG_LLM_MODEL")
        .env_remove("HOPRAG_LLM_BASE_URL");
    command
}

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/musique-train")
}

/// A musique-train index with its default heuristic graph, built once per test run;
/// `None` (the test skips) without the shared data or MiniLM, unless they are required.
fn built_index() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !data().join("corpus.json").exists() {
                assert!(std::env::var_os("HOPRAG_REQUIRE_DATA").is_none(), "no shared data at {}", data().display());
                eprintln!("skipped: no shared data at {}", data().display());
                return None;
            }
            let idx = Path::new(env!("CARGO_TARGET_TMPDIR")).join("concurrency-musique-index");
            let _ = std::fs::remove_dir_all(&idx);
            let corpus = data().join("corpus.json");
            let o = hoprag_command()
                .args(["index", "-q", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap()])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&o.stderr);
            if !o.status.success() && stderr.contains("hoprag models fetch") {
                assert!(std::env::var_os("HOPRAG_REQUIRE_MODELS").is_none(), "{stderr}");
                eprintln!("skipped: MiniLM is not installed");
                return None;
            }
            assert!(o.status.success(), "{stderr}");
            Some(idx)
        })
        .as_deref()
}

/// A fresh copy of the built index in `dir`.
fn fresh_index(dir: &Path) -> Option<PathBuf> {
    let built = built_index()?;
    let copy = dir.join("idx");
    copy_tree(built, &copy);
    Some(copy)
}

fn copy_tree(from: &Path, to: &Path) {
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

/// CPU time (user + system, in clock ticks) a process has used so far.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// Every thread's stack, by gdb if it is installed, else each thread's kernel wait.
fn thread_dump(pid: u32) -> String {
    let gdb = Command::new("gdb")
        .args(["-p", &pid.to_string(), "-batch", "-nx", "-ex", "thread apply all bt 40"])
        .stdin(Stdio::null())
        .output();
    match gdb {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => {
            let mut out = String::from("(gdb not installed: each thread's name and kernel wait channel)\n");
            if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                for task in tasks.flatten() {
                    let read = |f: &str| std::fs::read_to_string(task.path().join(f)).unwrap_or_default();
                    out.push_str(&format!("{} {} {}\n", read("comm").trim(), read("stat").trim(), read("wchan")));
                }
            }
            out
        }
    }
}

/// Waits for `child` to exit. Fails the test, with every thread's stack, if it stops
/// using CPU for `STALLED` or runs past `LIMIT`.
fn wait_watched(mut child: Child, what: &str) -> std::process::Output {
    let pid = child.id();
    // Drained by threads, so that full pipes never stall the child.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut b).ok();
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut b).ok();
        b
    });
    let (start, mut last, mut since) = (Instant::now(), cpu_ticks(pid), Instant::now());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(500));
        let now = cpu_ticks(pid);
        if now != last {
            (last, since) = (now, Instant::now());
        }
        if since.elapsed() >= STALLED || start.elapsed() >= LIMIT {
            let dump = thread_dump(pid);
            let _ = child.kill();
            let _ = child.wait();
            let stderr = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
            panic!(
                "{what}: hung (no CPU used for {:?}, {:?} in all); stderr:\n{}\nthreads:\n{dump}",
                since.elapsed(),
                start.elapsed(),
                tail(&stderr, 3000)
            );
        }
    };
    std::process::Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}

fn tail(s: &str, n: usize) -> &str {
    s[s.len() - s.len().min(n)..].trim_start_matches(|c: char| !c.is_ascii())
}

/// `hoprag eval` of every LLM-free method, each in a new process on a fresh copy of the
/// index (cold caches), behind `dense` as a user would compare them, round after round
/// with 2 and 3 rayon threads. Before the fix, `auto` hung in about one run of three.
#[test]
fn eval_of_every_llm_free_method_on_a_cold_index_never_hangs() {
    for round in 0..4 {
        let threads = ["2", "3"][round % 2];
        for method in METHODS {
            let dir = tempfile::tempdir().unwrap();
            let Some(index) = fresh_index(dir.path()) else { return };
            let report = dir.path().join("report.json");
            let methods = if method == "dense" { "dense".to_string() } else { format!("dense,{method}") };
            let child = hoprag_command()
                .env("RAYON_NUM_THREADS", threads)
                .args(["eval", "--index", index.to_str().unwrap()])
                .args(["--dataset", data().join("questions.json").to_str().unwrap(), "--limit", "24"])
                .args(["--method", &methods, "--k", "5", "--json", report.to_str().unwrap()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let what = format!("round {round}, {threads} threads: hoprag eval --method {methods}");
            let o = wait_watched(child, &what);
            assert!(o.status.success(), "{what}: {}", String::from_utf8_lossy(&o.stderr));
            let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
            let recall = &report["methods"][method]["recall"]["5"];
            assert!(recall.as_f64().is_some_and(|r| r > 0.0), "{what}: {method} R@5 = {recall}");
        }
    }
}

/// A server started cold, then for each method 16 concurrent first requests (distinct
/// questions) on 16 worker slots and 2 or 3 rayon threads: every one answers, and the
/// server never stops using CPU while requests are outstanding. Before the fix, `auto`
/// hung here in about one start of two.
#[test]
fn concurrent_first_requests_to_a_cold_server_never_hang() {
    let dir = tempfile::tempdir().unwrap();
    let Some(index) = fresh_index(dir.path()) else { return };
    let questions: Vec<String> = {
        let all: Value =
            serde_json::from_str(&std::fs::read_to_string(data().join("questions.json")).unwrap()).unwrap();
        all.as_array().unwrap().iter().map(|q| q["question"].as_str().unwrap().to_string()).collect()
    };
    for threads in ["2", "3"] {
        for method in METHODS {
            // A new server per method: each method's first requests meet cold caches.
            let what = format!("serve, {threads} threads, {method}: 16 concurrent first requests");
            let mut child = hoprag_command()
                .env("RAYON_NUM_THREADS", threads)
                .args(["serve", "--index", index.to_str().unwrap(), "--addr", "127.0.0.1:0"])
                .args(["--set", "serve.workers=16"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let pid = child.id();
            let mut line = String::new();
            let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
            let base = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
            let start = Arc::new(Barrier::new(17));
            let clients: Vec<_> = questions
                .iter()
                .take(16)
                .cloned()
                .map(|q| {
                    let (start, url) = (start.clone(), format!("{base}/v1/retrieve"));
                    std::thread::spawn(move || {
                        let client = reqwest::blocking::Client::builder().timeout(LIMIT).build().unwrap();
                        start.wait();
                        let r = client.post(url).json(&json!({"query": q, "method": method, "k": 5})).send();
                        (q, r.map(|r| (r.status(), r.text().unwrap_or_default())))
                    })
                })
                .collect();
            start.wait();
            let (mut last, mut since) = (cpu_ticks(pid), Instant::now());
            let mut hung = false;
            while !clients.iter().all(|c| c.is_finished()) {
                std::thread::sleep(Duration::from_millis(500));
                let now = cpu_ticks(pid);
                if now != last {
                    (last, since) = (now, Instant::now());
                }
                if since.elapsed() >= STALLED {
                    hung = true;
                    break;
                }
            }
            let answers: Vec<_> =
                if hung { Vec::new() } else { clients.into_iter().map(|c| c.join().unwrap()).collect() };
            let failed: Vec<String> = answers
                .iter()
                .filter_map(|(q, r)| match r {
                    Ok((status, body)) if status.is_success() => {
                        let body: Value = serde_json::from_str(body).unwrap();
                        let n = body["passages"].as_array().map(Vec::len);
                        (n != Some(5)).then(|| format!("{q:?}: {n:?} passages"))
                    }
                    Ok((status, body)) => Some(format!("{q:?}: {status} {body}")),
                    Err(e) => Some(format!("{q:?}: {e}")),
                })
                .collect();
            if hung || !failed.is_empty() {
                // Taken while the server still runs: a deadlocked one answers 504 (its
                // request timeout) while its workers stay parked.
                let dump = thread_dump(pid);
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: hung = {hung}; failed: {failed:#?}\nthreads:\n{dump}");
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
