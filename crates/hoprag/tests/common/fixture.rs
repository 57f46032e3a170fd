//! A tiny OpenAI-compatible fixture server on loopback: each request goes to a handler
//! that returns a status, a body and an optional delay, so tests can inject faults.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

pub struct Request {
    pub path: String,
    pub body: serde_json::Value,
    pub authorization: Option<String>,
    /// 0-based number of this request since the server started.
    pub n: usize,
}

pub struct Reply {
    pub status: u16,
    pub body: String,
    pub delay: Duration,
    /// Extra response headers, e.g. `Retry-After`.
    pub headers: Vec<(String, String)>,
    /// Sent instead of `body` when set: bytes that need not be UTF-8.
    pub raw: Option<Vec<u8>>,
}

impl Reply {
    pub fn json(v: serde_json::Value) -> Self {
        Reply { status: 200, body: v.to_string(), delay: Duration::ZERO, headers: Vec::new(), raw: None }
    }
    pub fn status(status: u16, body: &str) -> Self {
        Reply { status, body: body.to_string(), delay: Duration::ZERO, headers: Vec::new(), raw: None }
    }
}

pub struct Fixture {
    pub base_url: String,
    pub requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.base_url.trim_start_matches("http://").trim_end_matches("/v1"));
    }
}

impl Fixture {
    /// A chat client for this server: quick timeouts and one quick retry, JSON mode.
    pub fn chat_client(&self) -> hoprag::llm::OpenAiChat {
        hoprag::llm::OpenAiChat::new(hoprag::llm::OpenAiChatConfig {
            base_url: self.base_url.clone(),
            model: "fixture-chat".into(),
            api_key: None,
            timeout_secs: 5,
            retry: hoprag::http::RetryPolicy { max_retries: 1, initial_backoff_ms: 5, max_backoff_ms: 10 },
            max_concurrency: 4,
            json_mode: true,
            ..hoprag::llm::OpenAiChatConfig::default()
        })
        .unwrap()
    }

    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Fixture {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handler = Arc::new(handler);
        let (count, stopped) = (requests.clone(), stop.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let n = count.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                thread::spawn(move || serve(stream, n, handler.as_ref()));
            }
        });
        Fixture { base_url: format!("http://{addr}/v1"), requests, stop }
    }
}

fn serve(mut stream: TcpStream, n: usize, handler: &(dyn Fn(&Request) -> Reply + Send + Sync)) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (mut len, mut authorization) = (0usize, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap_or((&h, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => len = value.trim().parse().unwrap_or(0),
            "authorization" => authorization = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0; len];
    let _ = reader.read_exact(&mut body);
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let reply = handler(&Request { path, body, authorization, n });
    thread::sleep(reply.delay);
    let body = reply.raw.unwrap_or_else(|| reply.body.into_bytes());
    let headers: String = reply.headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let _ = write!(
        stream,
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        body.len(),
    );
    let _ = stream.write_all(&body);
}
