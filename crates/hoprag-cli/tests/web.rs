//! The web page of `hoprag serve` in a real browser: headless Chromium, driven over
//! the W3C WebDriver protocol (Debian's `chromium` and `chromium-driver`), against the
//! binary serving the demo index with its questions. It asks a question, follows the
//! hops, opens an evaluation report and runs one, looks at the index, and checks that
//! the browser logged no error.
//!
//! Skipped, with a message, where Chromium or its driver is not installed, unless
//! HOPRAG_REQUIRE_BROWSER is set (CI sets it). `measure_and_screenshot` (ignored by
//! default) does the same over any index and data set (HOPRAG_WEB_INDEX,
//! HOPRAG_WEB_DATASET) and writes a screenshot of each view to HOPRAG_WEB_SHOTS, with
//! the page's weight and time to first result.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::{json, Value};

const TOKEN: &str = "web-page-test-token";
/// The W3C WebDriver key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn hoprag_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hoprag"));
    // No LLM: the page must show the LLM methods as unavailable, not hang on them.
    command
        .env("HOPRAG_LLM_LOCAL", "/nonexistent/hoprag-test-model.gguf")
        .env_remove("HOPRAG_LLM_MODEL")
        .env_remove("HOPRAG_LLM_BASE_URL");
    command
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo")
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().flat_map(|n| std::env::split_paths(&path).map(move |dir| dir.join(n))).find(|p| p.is_file())
}

/// Chromium and its WebDriver, or `None` (and why) where they are not installed.
fn browser() -> Option<(Option<PathBuf>, PathBuf)> {
    let chromium = std::env::var_os("HOPRAG_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| on_path(&["chromium", "chromium-browser", "google-chrome"]));
    let driver = std::env::var_os("HOPRAG_CHROMEDRIVER").map(PathBuf::from).or_else(|| on_path(&["chromedriver"]));
    match (chromium, driver) {
        (Some(c), Some(d)) => Some((std::env::var_os("HOPRAG_CHROMIUM").map(|_| c), d)),
        _ => {
            assert!(
                std::env::var_os("HOPRAG_REQUIRE_BROWSER").is_none(),
                "HOPRAG_REQUIRE_BROWSER is set but chromium or chromedriver is not on PATH \
                 (apt-get install chromium chromium-driver)"
            );
            eprintln!(
                "skipped: the web page's browser test needs chromium and chromedriver \
                 (apt-get install chromium chromium-driver)"
            );
            None
        }
    }
}

fn run(args: &[&str]) -> Result<String, String> {
    let o = hoprag_command().args(args).output().expect("run hoprag");
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

/// An index of the demo corpus (with its heuristic entity graph), or `None` when the
/// embedder is not installed (and the tests may skip).
fn demo_index(dir: &Path) -> Option<PathBuf> {
    let idx = dir.join("idx");
    let corpus = demo().join("corpus.jsonl");
    match run(&["index", "--corpus", corpus.to_str().unwrap(), "--out", idx.to_str().unwrap(), "--quiet"]) {
        Ok(_) => {}
        Err(e) if e.contains("hoprag models fetch") && std::env::var_os("HOPRAG_REQUIRE_MODELS").is_none() => {
            eprintln!("skipped: no embedder installed (hoprag models fetch minilm): {e}");
            return None;
        }
        Err(e) => panic!("hoprag index: {e}"),
    }
    // `hoprag index` builds the heuristic entity graph too.
    Some(idx)
}

/// A running `hoprag serve` with the token set, and its address.
struct Server {
    child: Child,
    base: String,
    log: Arc<Mutex<String>>,
}

impl Server {
    fn start(index: &Path, dataset: &Path) -> Server {
        let mut child = hoprag_command()
            .args(["serve", "--index", index.to_str().unwrap(), "--addr", "127.0.0.1:0"])
            .args(["--dataset", dataset.to_str().unwrap()])
            .env("HOPRAG_TOKEN", TOKEN)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start hoprag serve");
        let log = Arc::new(Mutex::new(String::new()));
        let (sink, mut stderr) = (log.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
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
        let base = match line.trim().strip_prefix("listening on ") {
            Some(addr) => addr.to_string(),
            None => {
                let _ = child.wait();
                panic!("unexpected first line {line:?}; stderr: {}", log.lock().unwrap())
            }
        };
        Server { child, base, log }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver on a loopback port, and one browser session on it.
struct Browser {
    driver: Child,
    http: Client,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start(chromium: Option<&Path>, chromedriver: &Path) -> Browser {
        // A port the OS has just handed out, free again for chromedriver to take.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = Client::builder().timeout(Duration::from_secs(180)).build().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            let ready = http
                .get(format!("{base}/status"))
                .send()
                .ok()
                .and_then(|r| r.json::<Value>().ok())
                .is_some_and(|v| v["value"]["ready"] == true);
            if ready {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "chromedriver did not start on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = tempfile::tempdir().unwrap();
        let mut options = json!({"args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1440,1000", "--hide-scrollbars", "--force-device-scale-factor=1",
            format!("--user-data-dir={}", profile.path().display()),
        ]});
        if let Some(binary) = chromium {
            options["binary"] = json!(binary);
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options, "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let response: Value = http.post(format!("{base}/session")).json(&capabilities).send().unwrap().json().unwrap();
        let session = response["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {response}"))
            .to_string();
        Browser { driver, http, session: format!("{base}/session/{session}"), _profile: profile }
    }

    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response: Value = request.send().unwrap().json().unwrap();
        if let Some(error) = response["value"]["error"].as_str() {
            panic!("WebDriver {path}: {error}: {}", response["value"]["message"]);
        }
        response["value"].clone()
    }

    fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body))
    }

    fn goto(&self, url: &str) {
        self.post("/url", json!({"url": url}));
    }

    fn script(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args}))
    }

    /// A number the page computes.
    fn number(&self, expression: &str) -> f64 {
        let v = self.script(&format!("return {expression};"), json!([]));
        v.as_f64().unwrap_or_else(|| panic!("{expression} = {v}"))
    }

    fn count(&self, css: &str) -> usize {
        self.number(&format!("document.querySelectorAll({css:?}).length")) as usize
    }

    /// The WebDriver id of the first element `css` selects.
    fn find(&self, css: &str) -> String {
        let found = self.post("/element", json!({"using": "css selector", "value": css}));
        found[ELEMENT].as_str().unwrap_or_else(|| panic!("{css}: {found}")).to_string()
    }

    fn click(&self, css: &str) {
        let id = self.find(css);
        self.post(&format!("/element/{id}/click"), json!({}));
    }

    fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.post(&format!("/element/{id}/value"), json!({"text": text}));
    }

    /// Waits until `condition` (a JavaScript expression) holds, or fails with what the
    /// page shows.
    fn wait_for(&self, condition: &str, what: &str) {
        let started = Instant::now();
        loop {
            if self.script(&format!("return !!({condition});"), json!([])) == json!(true) {
                return;
            }
            if started.elapsed() > Duration::from_secs(120) {
                let shown = self.script("return document.querySelector('#message').textContent", json!([]));
                panic!("timed out waiting for {what} ({condition}); the page's message: {shown}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for a view to have drawn itself, after a navigation that changes it.
    fn wait_ready(&self, view: &str) {
        let ready = "document.body.dataset.ready";
        self.wait_for(&format!("{ready} === {view:?} || {ready} === 'error'"), &format!("the {view} view"));
        let shown =
            self.script(&format!("return [{ready}, document.querySelector('#message').textContent]"), json!([]));
        assert_eq!(shown[0], json!(view), "the page shows an error: {}", shown[1]);
    }

    fn unready(&self) {
        self.script("delete document.body.dataset.ready;", json!([]));
    }

    /// The browser's console and network errors since the last call.
    fn severe_logs(&self) -> Vec<Value> {
        let logs = self.post("/se/log", json!({"type": "browser"}));
        logs.as_array().unwrap().iter().filter(|l| l["level"] == "SEVERE").cloned().collect()
    }

    /// The whole page (the window grown to its height, up to 2,400 pixels), as a PNG.
    fn screenshot(&self, path: &Path) {
        let height = self.number("document.documentElement.scrollHeight").min(2400.0);
        // The window's outer height includes what the browser draws around the page.
        let chrome = self.number("window.outerHeight - window.innerHeight");
        self.post("/window/rect", json!({"width": 1440, "height": height + chrome}));
        let png = self.call(reqwest::Method::GET, "/screenshot", None);
        std::fs::write(path, decode_base64(png.as_str().unwrap())).unwrap();
        self.post("/window/rect", json!({"width": 1440, "height": 1000}));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.http.delete(&self.session).send();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64, as WebDriver sends screenshots (no crate for one call).
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let clean: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &c)| n | (value(c) as u32) << (18 - 6 * i));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    out
}

/// What the page weighs and how long it takes, measured in the browser.
struct Measures {
    /// Bytes transferred on a first load (headers included), and the files' sizes.
    transferred: f64,
    bodies: f64,
    files: usize,
    /// From the start of a first load of a question's URL to its first list on screen.
    load_to_first_result_ms: f64,
    /// From pressing Ask to the first method's list on screen, and to all of them.
    first_result_ms: f64,
    all_results_ms: f64,
}

impl std::fmt::Display for Measures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "first load: {} files, {:.0} bytes transferred ({:.0} bytes of content), {:.0} ms from \
             navigation to the first list on screen (token typed in between); Ask to the first \
             list on screen {:.0} ms, to every list {:.0} ms",
            self.files,
            self.transferred,
            self.bodies,
            self.load_to_first_result_ms,
            self.first_result_ms,
            self.all_results_ms
        )
    }
}

/// The page through all its views, checked as a person would look at it. With `shots`,
/// a screenshot of each view goes there.
fn walk_through(
    browser: &Browser,
    base: &str,
    qid: &str,
    ask: &str,
    report: Option<&Path>,
    shots: Option<&Path>,
) -> Measures {
    let shoot = |name: &str| {
        if let Some(dir) = shots {
            browser.screenshot(&dir.join(format!("web-{name}.png")));
        }
    };
    // A fresh profile: the first load transfers everything. The page asks for the
    // token before its first API call.
    browser.goto(&format!("{base}/?view=ask&qid={qid}&methods=dense,hybrid,ppr&k=5"));
    browser.wait_for("document.querySelector('#token-dialog').open", "the token dialog");
    browser.type_into("#token", TOKEN);
    browser.click("#token-form button[type=submit]");
    browser.wait_ready("ask");
    let weight = browser.script(
        "const e = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]
           .filter(x => !x.name.includes('/v1/'));
         return [e.reduce((a, x) => a + x.transferSize, 0), e.reduce((a, x) => a + x.encodedBodySize, 0), e.length];",
        json!([]),
    );
    let load_to_first_result_ms = browser.number(
        "performance.getEntriesByName('hoprag:ask')[0].startTime
         + performance.getEntriesByName('hoprag:first-result')[0].duration",
    );
    assert_eq!(browser.count("#columns .col"), 3, "one column per method");
    assert_eq!(browser.count("#columns .col[data-method=dense] .hit"), 5, "k = 5 passages");
    assert!(browser.count("#columns .hit.gold") >= 1, "the gold passages are marked");
    assert!(browser.count("#columns .recall") == 3, "R@k per method");
    // Hovering a passage lights it up in every column that has it.
    let lit = browser.script(
        "const hit = document.querySelector('#columns .col[data-method=dense] .hit');
         hit.dispatchEvent(new MouseEvent('mouseenter'));
         const lit = [...document.querySelectorAll('#columns .hit.hl')];
         return [lit.length, lit.every(x => x.dataset.pid === hit.dataset.pid)];",
        json!([]),
    );
    assert!(lit[0].as_u64().unwrap() >= 1 && lit[1] == json!(true), "{lit}");
    shoot("ask");
    browser.script("document.querySelector('#columns .hit').dispatchEvent(new MouseEvent('mouseleave'));", json!([]));
    // Ask again by hand (the typical use): time to the first list on screen.
    browser.unready();
    browser.script("document.querySelector('#q').value = '';", json!([]));
    browser.type_into("#q", ask);
    browser.click("#ask-form button[type=submit]");
    browser.wait_ready("ask");
    let first_result_ms = browser.number("performance.getEntriesByName('hoprag:first-result')[0].duration");
    let all_results_ms = browser.number("performance.getEntriesByName('hoprag:all-results')[0].duration");
    let url = browser.script("return new URLSearchParams(location.search).get('q')", json!([]));
    assert_eq!(url, json!(ask), "the URL holds the question");

    // The hops of ppr for the data set's question: a drawn graph.
    browser.goto(&format!("{base}/?view=hops&qid={qid}&methods=dense,hybrid,ppr&k=5&m=ppr"));
    browser.wait_ready("hops");
    let nodes = browser.count("#hops svg.graph .node");
    assert!(nodes > 3, "the walk's graph has {nodes} nodes");
    assert!(browser.count("#hops svg.graph .edge") > 0, "and edges");
    assert!(browser.count("#hops .waterfall .bar") >= 3, "step timings");
    // Drag and wheel move the view.
    let before = browser.script("return document.querySelector('#hops svg.graph').getAttribute('viewBox')", json!([]));
    browser.script(
        "const g = document.querySelector('#hops svg.graph'); const r = g.getBoundingClientRect();
         g.dispatchEvent(new WheelEvent('wheel', {deltaY: -200, clientX: r.left + 200, clientY: r.top + 200, bubbles: true, cancelable: true}));",
        json!([]),
    );
    let after = browser.script("return document.querySelector('#hops svg.graph').getAttribute('viewBox')", json!([]));
    assert_ne!(before, after, "the wheel zooms");
    browser.script("document.querySelector('#hops svg.graph').dispatchEvent(new MouseEvent('dblclick'));", json!([]));
    shoot("hops");
    // A GEAR method's beams (naive_ge runs without an LLM).
    browser.goto(&format!("{base}/?view=hops&qid={qid}&m=naive_ge"));
    browser.wait_ready("hops");
    assert!(browser.count("#hops .agent-step") >= 1, "the expansion steps");

    // An evaluation: the report opened from a file, then one run on the server.
    browser.goto(&format!("{base}/?view=eval"));
    browser.wait_for("!document.querySelector('#eval-form').hidden", "the evaluation form");
    if let Some(report) = report {
        browser.unready();
        browser.type_into("#report-file", report.to_str().unwrap());
        browser.wait_ready("eval");
        let methods = serde_json::from_slice::<Value>(&std::fs::read(report).unwrap()).unwrap()["methods"]
            .as_object()
            .unwrap()
            .len();
        assert_eq!(browser.count("#report svg.line-chart path.line"), methods, "a curve per method");
        assert!(browser.count("#report svg.bar-chart rect.bar-rect") >= 3, "bars per type");
        assert!(browser.count("#report table tr") >= 4, "the methods' table");
        shoot("eval");
    }
    browser.unready();
    browser.script("document.querySelector('#eval-limit').value = 10;", json!([]));
    browser.click("#eval-form button[type=submit]");
    browser.wait_ready("eval");
    assert!(browser.count("#report svg.line-chart path.line") >= 2, "curves of the server's run");
    if report.is_none() {
        shoot("eval");
    }
    if browser.count("#report .flips a") > 0 {
        browser.unready();
        browser.click("#report .flips a");
        browser.wait_ready("ask");
        assert_eq!(browser.count("#columns .col"), 2, "a flip opens the two methods side by side");
    }

    // The index at a glance, and an entity's neighbourhood.
    browser.unready();
    browser.click("#tabs a[data-view=index]");
    browser.wait_ready("index");
    assert!(browser.count("#index-info .card") >= 6);
    let entity = browser.script("return document.querySelector('#index-info a').textContent", json!([]));
    browser.unready();
    match std::env::var("HOPRAG_WEB_ENTITY") {
        Ok(name) => browser.goto(&format!("{base}/?view=index&entity={name}")),
        Err(_) => browser.click("#index-info a"),
    }
    browser.wait_ready("index");
    assert!(browser.count("#entity-view svg.graph .node") >= 2, "{entity}'s neighbourhood is drawn");
    shoot("index");

    Measures {
        load_to_first_result_ms,
        transferred: weight[0].as_f64().unwrap(),
        bodies: weight[1].as_f64().unwrap(),
        files: weight[2].as_u64().unwrap() as usize,
        first_result_ms,
        all_results_ms,
    }
}

/// The drawings of the LLM methods' traces, from results opened as files (this test has
/// no LLM to run them): BridgeRAG's chain and pool, GEAR's steps and beams. And
/// RegimeRouter's decision, which runs without one.
fn llm_traces(browser: &Browser, base: &str, dir: &Path) {
    let step = |name: &str, micros: u64, detail: Value| json!({"name": name, "micros": micros, "detail": detail});
    let llm = json!({"calls": 1, "cache_hits": 0, "errors": 0, "retries": 0, "latency_ms": 900.0,
        "tokens_spent": {"prompt_tokens": 412, "completion_tokens": 58},
        "tokens_from_cache": {"prompt_tokens": 0, "completion_tokens": 0}, "parse_failures": 0, "parse_failure_examples": []});
    let llm_step = |name: &str, micros: u64, detail: Value| {
        let mut s = step(name, micros, detail);
        s["llm"] = llm.clone();
        s
    };
    let question = "Who founded the company that built the lighthouse on Varn Island?";
    let passages = json!([
        {"rank": 1, "id": "p21", "title": "Ardent Ironworks", "text": "…", "score": 0.95},
        {"rank": 2, "id": "p20", "title": "Varn Light", "text": "…", "score": 0.8},
    ]);
    let pool = |id: &str, svo: f64, judge: f64, f: f64| json!({"id": id, "from": ["svo"], "pool_score": svo, "svo": svo, "judge": judge, "f": f});
    let bridge = json!({"query": question, "method": "bridge_rag", "k": 2, "passages": passages, "trace": {"steps": [
        step("embed query", 6000, json!({})),
        llm_step("svo queries", 910_000, Value::Null),
        llm_step("judge", 1_800_000, Value::Null),
        step("decision record", 1, json!({"condition": "c", "bridge": "p20", "e1": "Ardent Ironworks", "e2": "Varn Light",
            "svo_queries": ["Ardent Ironworks was founded by someone", "founder of Ardent Ironworks"],
            "pool": [pool("p21", 0.71, 9.0, 0.95), pool("p20", 0.69, 7.0, 0.8)], "ranking": ["p21", "p20"],
            "warnings": [], "fell_back_to_dense": false})),
    ]}});
    let gear = json!({"query": question, "method": "gear", "k": 2, "passages": passages, "trace": {"steps": [
        step("iteration", 1, json!({"step": 1, "query": question})),
        llm_step("read", 800_000, json!({"passages": 5, "proximal_triples": [
            {"subject": "Varn Light", "predicate": "prefabricated by", "object": "Ardent Ironworks"}]})),
        step("beam search", 500, json!({"beams": [{"score": 0.93, "triples": [
            "Varn Light was prefabricated by Ardent Ironworks", "Ardent Ironworks founded by Maud Corrigan"]}],
            "passages": [19, 20]})),
        llm_step("reason", 600_000, json!({"verdict": {"answerable": true, "answer": "Maud Corrigan", "reason": "…",
            "parsed": true}})),
        step("fuse all", 30, json!({"steps": 1, "stopped": "answerable", "memory": [], "linked_lists": 1, "rounds": 1})),
    ]}});
    browser.goto(&format!("{base}/?view=hops"));
    browser.wait_ready("hops");
    for (name, result) in [("bridge", &bridge), ("gear", &gear)] {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, result.to_string()).unwrap();
        browser.unready();
        browser.type_into("#trace-file", file.to_str().unwrap());
        browser.wait_ready("hops");
    }
    // The last one opened is drawn; each drawing is checked as it comes.
    assert_eq!(browser.count("#hops .chain .triple"), 3, "the triple read and the beam's two");
    assert_eq!(browser.count("#hops .waterfall .bar.llm"), 2, "LLM steps stand out");
    browser.unready();
    browser.type_into("#trace-file", dir.join("bridge.json").to_str().unwrap());
    browser.wait_ready("hops");
    assert_eq!(browser.count("#hops .flow > div:not(.arrow)"), 4, "bridge, queries, entities, pool");
    assert_eq!(browser.count("#hops table tr"), 3, "the pool, with its header");
    browser.goto(&format!("{base}/?view=hops&qid=demo-01&m=regime_router"));
    browser.wait_ready("hops");
    assert_eq!(browser.count("#hops .gauge"), 1, "P(union) against the threshold");
}

#[test]
fn the_page_in_a_browser() {
    let Some((chromium, chromedriver)) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(idx) = demo_index(dir.path()) else { return };
    let dataset = demo().join("questions.jsonl");
    let report = dir.path().join("report.json");
    run(&[
        "eval",
        "--index",
        idx.to_str().unwrap(),
        "--dataset",
        dataset.to_str().unwrap(),
        "--method",
        "dense,ppr,hybrid",
        "--baseline",
        "dense",
        "--json",
        report.to_str().unwrap(),
        "--quiet",
    ])
    .expect("hoprag eval");
    let server = Server::start(&idx, &dataset);
    let browser = Browser::start(chromium.as_deref(), &chromedriver);
    let ask = "Which river flows through the town where the company that made the Varn Light lens was based?";
    let measures = walk_through(&browser, &server.base, "demo-01", ask, Some(&report), None);
    llm_traces(&browser, &server.base, dir.path());
    eprintln!("{measures}");
    assert!(measures.files >= 4 && measures.bodies > 10_000.0, "{measures}");
    let errors = browser.severe_logs();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}\nserver log:\n{}", server.log.lock().unwrap());
}

/// Screenshots and measures over any index: HOPRAG_WEB_INDEX, HOPRAG_WEB_DATASET, and
/// optionally HOPRAG_WEB_QID (default: the first question), HOPRAG_WEB_ASK (a question
/// to time), HOPRAG_WEB_ENTITY (an entity to show), HOPRAG_WEB_REPORT (an `hoprag eval
/// --json` file) and HOPRAG_WEB_SHOTS (a folder for the PNGs).
#[test]
#[ignore = "measures and screenshots on demand: set HOPRAG_WEB_INDEX and HOPRAG_WEB_DATASET"]
fn measure_and_screenshot() {
    let Some((chromium, chromedriver)) = browser() else { return };
    let env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let index = env("HOPRAG_WEB_INDEX").expect("HOPRAG_WEB_INDEX");
    let dataset = env("HOPRAG_WEB_DATASET").expect("HOPRAG_WEB_DATASET");
    let qid = std::env::var("HOPRAG_WEB_QID").unwrap_or_else(|_| {
        let (_, questions) = hoprag::dataset::load_dataset(&dataset).unwrap();
        questions[0].id.clone()
    });
    let shots = env("HOPRAG_WEB_SHOTS");
    if let Some(dir) = &shots {
        std::fs::create_dir_all(dir).unwrap();
    }
    let server = Server::start(&index, &dataset);
    let browser = Browser::start(chromium.as_deref(), &chromedriver);
    let ask =
        std::env::var("HOPRAG_WEB_ASK").unwrap_or_else(|_| "Who is the spouse of the director of Big Eye?".into());
    let report = env("HOPRAG_WEB_REPORT");
    let measures = walk_through(&browser, &server.base, &qid, &ask, report.as_deref(), shots.as_deref());
    println!("{measures}");
    let errors = browser.severe_logs();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");
}
