//! The floor the HTTP door is measured against: memfs's own listener
//! (`memfs_web::listen`, the one `serve --http` runs on: hyper on its
//! runtime, a request's precheck, body and handler on a blocking thread)
//! with nothing behind it. Every request is answered 200 with a fixed JSON
//! body of a memory's size, so that what a client times is the transport
//! and the listener alone; `scripts/bench_http.py --floor BIN` times it
//! with the same lean client as the API.
//!
//! usage: http_floor ADDR   (prints `listening on http://ADDR` when ready)
use std::sync::Arc;
use std::time::Duration;

use memfs_web::listen;

/// A memory as a retrieve with its content answers it (about 400 bytes).
const BODY: &str = concat!(
    r#"{"type":"memory","id":"mem_1","memory_store_id":"memstore_1","path":"/bench/0.md","#,
    r#""content_sha256":"0000000000000000000000000000000000000000000000000000000000000000","#,
    r#""content_size_bytes":70,"created_at":"2026-12-07T00:00:00.000000Z","#,
    r#""updated_at":"2026-12-07T00:00:00.000000Z","memory_version_id":"memver_1","#,
    r#""content":"note 0\nnote 0\nnote 0\nnote 0\nnote 0\nnote 0\nnote 0\nnote 0\nnote 0\nnote 0\n"}"#
);

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let (listener, local) = listen::bind(&addr).expect("binds");
    println!("listening on http://{local}");
    let limits = listen::Limits {
        max_body: 1 << 20,
        max_headers: 64,
        header_timeout: Duration::from_secs(10),
        body_timeout: Duration::from_secs(10),
        max_connections: 256,
        max_pending: 256,
        quick_precheck: std::env::var_os("HTTP_FLOOR_BLOCKING").is_none(),
    };
    let handler: Arc<listen::Handler> = Arc::new(|_parts, _body| {
        let mut r = hyper::Response::new(listen::Body::new(BODY.as_bytes().to_vec().into()));
        r.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("application/json"),
        );
        r
    });
    let precheck: Arc<listen::Precheck> = Arc::new(|parts| {
        let quick = match parts.method == hyper::Method::GET {
            true => listen::Quick::Read,
            false => listen::Quick::Write,
        };
        parts.extensions.insert(quick);
        Ok(1 << 20)
    });
    listen::run(listener, limits, handler, Some(precheck), Box::new(|| {}))
        .expect("serves until a signal");
}
