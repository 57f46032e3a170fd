//! Request counters and latency histograms in the Prometheus text format.
//!
//! Written by hand: a dozen fixed series do not earn a metrics crate and its exporter
//! (and their compile time); the format is a few lines of text.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use hoprag::llm::LlmStatsSnapshot;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

#[derive(Default)]
pub struct Metrics {
    routes: Mutex<BTreeMap<String, Route>>,
    /// By namespace and method.
    retrievals: Mutex<BTreeMap<(String, String), u64>>,
    in_flight: AtomicI64,
}

#[derive(Default)]
struct Route {
    by_status: BTreeMap<u16, u64>,
    /// Counts per bucket (not cumulative; summed when written), then +Inf.
    buckets: [u64; BUCKETS.len() + 1],
    seconds: f64,
    count: u64,
}

/// What `/metrics` reports besides the counters, for the token asking.
pub struct Gauges {
    /// The open namespaces the token may see.
    pub namespaces: Vec<NamespaceGauge>,
    pub llm: Option<LlmStatsSnapshot>,
    /// Whether the server's own series (every route's requests) are written: only to a
    /// token that reads every namespace.
    pub server_wide: bool,
}

pub struct NamespaceGauge {
    pub namespace: String,
    pub passages: usize,
}

impl Metrics {
    pub fn record(&self, route: &str, status: u16, elapsed: Duration) {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let r = routes.entry(route.to_string()).or_default();
        *r.by_status.entry(status).or_default() += 1;
        let secs = elapsed.as_secs_f64();
        let bucket = BUCKETS.iter().position(|&b| secs <= b).unwrap_or(BUCKETS.len());
        r.buckets[bucket] += 1;
        r.seconds += secs;
        r.count += 1;
    }

    pub fn record_retrieval(&self, namespace: &impl std::fmt::Display, method: &str) {
        let key = (namespace.to_string(), method.to_string());
        *self.retrievals.lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_default() += 1;
    }

    /// Counts a request as in flight until the guard is dropped (also when the client
    /// goes away and the request future is dropped).
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    /// The exposition, text format 0.0.4: the series of the namespaces `visible` admits,
    /// and the server's own when `gauges.server_wide`.
    pub fn render(&self, gauges: &Gauges, visible: &dyn Fn(&str) -> bool) -> String {
        let mut out = String::new();
        if gauges.server_wide {
            self.render_routes(&mut out);
        }
        head(
            &mut out,
            "hoprag_retrievals_total",
            "counter",
            "Queries answered, by namespace and method (batch items count one each).",
        );
        for ((namespace, method), n) in self.retrievals.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            if visible(namespace) {
                let _ = writeln!(
                    out,
                    "hoprag_retrievals_total{{namespace=\"{}\",method=\"{}\"}} {n}",
                    esc(namespace),
                    esc(method)
                );
            }
        }
        head(&mut out, "hoprag_index_passages", "gauge", "Passages in each open namespace's served index.");
        for g in &gauges.namespaces {
            let _ = writeln!(out, "hoprag_index_passages{{namespace=\"{}\"}} {}", esc(&g.namespace), g.passages);
        }
        if gauges.server_wide {
            head(&mut out, "hoprag_namespaces_open", "gauge", "Namespaces open (loaded in memory).");
            let _ = writeln!(out, "hoprag_namespaces_open {}", gauges.namespaces.len());
        }
        if let Some(llm) = &gauges.llm {
            render_llm(&mut out, llm);
        }
        out
    }

    fn render_routes(&self, out: &mut String) {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        head(out, "hoprag_http_requests_total", "counter", "HTTP requests by route and status.");
        for (route, r) in routes.iter() {
            for (status, n) in &r.by_status {
                let _ = writeln!(out, "hoprag_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}", esc(route));
            }
        }
        let name = "hoprag_http_request_duration_seconds";
        head(out, name, "histogram", "HTTP request latency by route.");
        for (route, r) in routes.iter() {
            let route = esc(route);
            let mut cumulative = 0;
            for (i, n) in r.buckets.iter().enumerate() {
                cumulative += n;
                let le = BUCKETS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
                let _ = writeln!(out, "{name}_bucket{{route=\"{route}\",le=\"{le}\"}} {cumulative}");
            }
            let _ = writeln!(out, "{name}_sum{{route=\"{route}\"}} {}", r.seconds);
            let _ = writeln!(out, "{name}_count{{route=\"{route}\"}} {}", r.count);
        }
        drop(routes);
        head(out, "hoprag_http_requests_in_flight", "gauge", "HTTP requests being served.");
        let _ = writeln!(out, "hoprag_http_requests_in_flight {}", self.in_flight.load(Ordering::Relaxed));
    }
}

fn render_llm(out: &mut String, s: &LlmStatsSnapshot) {
    for (name, help, value) in [
        ("hoprag_llm_calls_total", "LLM chat calls (cache hits and failures included).", s.calls),
        ("hoprag_llm_cache_hits_total", "LLM calls answered from the response cache.", s.cache_hits),
        ("hoprag_llm_errors_total", "LLM calls that failed after their retries.", s.errors),
    ] {
        head(out, name, "counter", help);
        let _ = writeln!(out, "{name} {value}");
    }
    let name = "hoprag_llm_tokens_total";
    head(out, name, "counter", "LLM tokens: spent now, or served from the cache (spent by an earlier run).");
    for (source, usage) in [("spent", s.tokens_spent), ("cache", s.tokens_from_cache)] {
        let _ = writeln!(out, "{name}{{kind=\"prompt\",source=\"{source}\"}} {}", usage.prompt_tokens);
        let _ = writeln!(out, "{name}{{kind=\"completion\",source=\"{source}\"}} {}", usage.completion_tokens);
    }
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Label values escaped as the text format wants.
fn esc(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

pub struct InFlight<'a>(&'a AtomicI64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let m = Metrics::default();
        m.record("/v1/retrieve", 200, Duration::from_millis(3));
        m.record("/v1/retrieve", 200, Duration::from_millis(40));
        m.record("/v1/retrieve", 400, Duration::from_secs(60));
        m.record_retrieval(&"ns", "a\"b");
        m.record_retrieval(&"hidden", "a method");
        let gauges = Gauges {
            namespaces: vec![NamespaceGauge { namespace: "ns".into(), passages: 7 }],
            llm: None,
            server_wide: true,
        };
        let text = m.render(&gauges, &|n| n == "ns");
        assert!(text.contains("hoprag_http_requests_total{route=\"/v1/retrieve\",status=\"200\"} 2"), "{text}");
        assert!(text.contains("hoprag_http_requests_total{route=\"/v1/retrieve\",status=\"400\"} 1"));
        let bucket =
            |le: &str| format!("hoprag_http_request_duration_seconds_bucket{{route=\"/v1/retrieve\",le=\"{le}\"}}");
        assert!(text.contains(&format!("{} 0\n", bucket("0.001"))));
        assert!(text.contains(&format!("{} 1\n", bucket("0.005"))));
        assert!(text.contains(&format!("{} 2\n", bucket("0.05"))));
        assert!(text.contains(&format!("{} 2\n", bucket("30"))));
        assert!(text.contains(&format!("{} 3\n", bucket("+Inf"))));
        assert!(text.contains("hoprag_http_request_duration_seconds_count{route=\"/v1/retrieve\"} 3"));
        assert!(text.contains("hoprag_retrievals_total{namespace=\"ns\",method=\"a\\\"b\"} 1"), "{text}");
        assert!(text.contains("hoprag_index_passages{namespace=\"ns\"} 7"));
        assert!(!text.contains("hidden"), "a namespace the token does not open is not shown");
        let scoped = m.render(&Gauges { server_wide: false, ..gauges }, &|n| n == "ns");
        assert!(!scoped.contains("hoprag_http_requests_total{"), "route counts are the server's: {scoped}");
        assert!(!text.contains("hoprag_llm"), "no LLM series without an LLM");
    }

    #[test]
    fn llm_counters_are_written_when_there_is_an_llm() {
        use hoprag::llm::Usage;
        let llm = LlmStatsSnapshot {
            calls: 5,
            cache_hits: 2,
            errors: 1,
            tokens_spent: Usage { prompt_tokens: 100, completion_tokens: 20 },
            tokens_from_cache: Usage { prompt_tokens: 40, completion_tokens: 8 },
            ..Default::default()
        };
        let gauges = Gauges { namespaces: Vec::new(), llm: Some(llm), server_wide: true };
        let text = Metrics::default().render(&gauges, &|_| true);
        for line in [
            "hoprag_llm_calls_total 5",
            "hoprag_llm_cache_hits_total 2",
            "hoprag_llm_errors_total 1",
            "hoprag_llm_tokens_total{kind=\"prompt\",source=\"spent\"} 100",
            "hoprag_llm_tokens_total{kind=\"completion\",source=\"spent\"} 20",
            "hoprag_llm_tokens_total{kind=\"prompt\",source=\"cache\"} 40",
            "hoprag_llm_tokens_total{kind=\"completion\",source=\"cache\"} 8",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
    }
}
