//! The web page at `/`: one HTML file, one script and one style sheet, built into the
//! binary, with no build step and nothing fetched from elsewhere (it works offline).
//! The page itself needs no token; the API calls it makes do, and it asks for one
//! when the server answers 401.

use std::sync::OnceLock;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset { path: "/", content_type: "text/html; charset=utf-8", body: include_bytes!("index.html") },
    Asset { path: "/app.js", content_type: "text/javascript; charset=utf-8", body: include_bytes!("app.js") },
    Asset { path: "/app.css", content_type: "text/css; charset=utf-8", body: include_bytes!("app.css") },
    Asset { path: "/favicon.svg", content_type: "image/svg+xml", body: include_bytes!("favicon.svg") },
];

/// Everything the page loads comes from this server; scripts and styles only from
/// its files (no inline code), so that text from the index can never run as script.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The routes of the page's files, each with an ETag so that a reload costs a 304.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new();
    for (i, asset) in ASSETS.iter().enumerate() {
        router = router.route(asset.path, get(move |headers: HeaderMap| async move { serve(i, &headers) }));
    }
    router
}

fn serve(i: usize, headers: &HeaderMap) -> Response {
    static ETAGS: OnceLock<Vec<HeaderValue>> = OnceLock::new();
    let etags = ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = Sha256::digest(a.body);
                HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..8]))).expect("hex is a valid header")
            })
            .collect()
    });
    let (asset, etag) = (&ASSETS[i], &etags[i]);
    let cached = headers.get(header::IF_NONE_MATCH).is_some_and(|v| v == etag);
    let common = [
        (header::ETAG, etag.clone()),
        // Revalidated every time: a new binary must never run an old script.
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP)),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    ];
    if cached {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (common, [(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files() {
        let html = std::str::from_utf8(ASSETS[0].body).unwrap();
        for asset in &ASSETS[1..] {
            assert!(html.contains(&format!("\"{}\"", asset.path)), "index.html does not load {}", asset.path);
        }
        // No inline script or style: the CSP would block it.
        assert!(!html.contains("<script>") && !html.contains("style="), "inline code in index.html");
        assert!(!html.contains("http://") && !html.contains("https://"), "index.html loads from elsewhere");
    }

    #[test]
    fn a_known_etag_gets_a_304() {
        let first = serve(1, &HeaderMap::new());
        assert_eq!(first.status(), StatusCode::OK);
        let etag = first.headers()[header::ETAG].clone();
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, etag);
        assert_eq!(serve(1, &headers).status(), StatusCode::NOT_MODIFIED);
    }
}
