//! The floor the HTTP door is measured against: memfs's own listener
//! (`memfs_web::listen`, the one `serve --http` runs on: hyper on its
//! runtime, a request's precheck, body and handler on a blocking thread)
//! with nothing behind it. Every request is answered 200 with a fixed JSON
//! body of a memory's size, so that what a client times is the transport
//! and the listener alone; `scripts/bench_http.py --floor BIN` times it
//! with the same lean client as the API.
//!
//! With `HTTP_FLOOR_PG=URL` it is the floor of a create on a stores root
//! in PostgreSQL instead (`scripts/bench_http_pg.py --floor BIN`): each
//! POST runs, on one connection and prepared, a statement of the shape of
//! the shared store's batch write (`crates/shared/src/db.rs`, `WRITE`: the
//! store's counter moved, the content, the path touched, the batch's row,
//! the wake-up; committed as it ends) before it is answered, with the
//! listener set as `serve --http` sets it for such a root (everything on
//! the blocking pool). With `HTTP_FLOOR_PG_LOOK=1` the request's head is
//! also read first, as memfs reads it (the token, the store's record and
//! its head in one prepared statement): the floor of a server that checks
//! each request against the database.
//!
//! usage: http_floor ADDR   (prints `listening on http://ADDR` when ready)
use std::sync::{Arc, Mutex};
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

/// The batch write's shape (see the module's doc), its counter moved by
/// one where memfs's is guarded by the head it read.
const WRITE: &str = "WITH \
    u AS (UPDATE floor_stores SET seq = seq + 1 WHERE name = $1 RETURNING seq), \
    c AS (INSERT INTO floor_contents (store, sha, data) SELECT $1, $2, $3 ON CONFLICT DO NOTHING), \
    t AS (INSERT INTO floor_touches (store, path, seq, origin) SELECT $1, $4, u.seq, 'floor' FROM u \
          ON CONFLICT DO NOTHING), \
    b AS (INSERT INTO floor_batches (store, seq, first, origin, batch, time, changes) \
          SELECT $1, u.seq, u.seq, 'floor', u.seq, now()::text, $5 FROM u) \
    SELECT 1 / (SELECT COUNT(*) FROM u), pg_notify('floor', $1)";

/// The request head's read, as `PgCatalog::look` reads it.
const LOOK: &str = "SELECT (SELECT record FROM floor_tokens WHERE sha256 = $1), \
    (SELECT name FROM floor_stores WHERE name = $2), (SELECT seq FROM floor_stores WHERE name = $2)";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS floor_stores (name TEXT PRIMARY KEY, seq BIGINT NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS floor_contents (store TEXT, sha TEXT, data BYTEA, PRIMARY KEY (store, sha));
CREATE TABLE IF NOT EXISTS floor_touches (store TEXT, path TEXT, seq BIGINT, origin TEXT,
    PRIMARY KEY (store, path, seq));
CREATE TABLE IF NOT EXISTS floor_batches (store TEXT, seq BIGINT, first BIGINT, origin TEXT, batch BIGINT,
    time TEXT, changes TEXT, PRIMARY KEY (store, seq));
CREATE TABLE IF NOT EXISTS floor_tokens (sha256 TEXT PRIMARY KEY, record TEXT);
INSERT INTO floor_stores (name) VALUES ('floor') ON CONFLICT DO NOTHING;
INSERT INTO floor_tokens (sha256, record) VALUES ('t', '{}') ON CONFLICT DO NOTHING;
";

/// One connection, its statements prepared, and a counter for the rows.
struct Pg {
    client: postgres::Client,
    write: postgres::Statement,
    look: Option<postgres::Statement>,
    n: u64,
}

impl Pg {
    fn open(url: &str, look: bool) -> Pg {
        let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connects");
        client.batch_execute(SCHEMA).expect("tables");
        let write = client.prepare(WRITE).expect("prepares");
        let look = look.then(|| client.prepare(LOOK).expect("prepares"));
        Pg {
            client,
            write,
            look,
            n: 0,
        }
    }

    /// What a create asks of the database: the head's read (if asked for)
    /// and the batch's write.
    fn create(&mut self, body: &[u8]) {
        if let Some(look) = &self.look {
            self.client
                .query_one(look, &[&"t", &"floor"])
                .expect("looks");
        }
        self.n += 1;
        let sha = format!("{:x}-{}", self.n, std::process::id());
        let path = format!("/bench/{}.md", self.n);
        let changes = String::from_utf8_lossy(body).into_owned();
        self.client
            .query_one(&self.write, &[&"floor", &sha, &body, &path, &changes])
            .expect("writes");
    }
}

fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let pg = std::env::var("HTTP_FLOOR_PG").ok().map(|url| {
        let look = std::env::var_os("HTTP_FLOOR_PG_LOOK").is_some();
        Mutex::new(Pg::open(&url, look))
    });
    let (listener, local) = listen::bind(&addr).expect("binds");
    println!("listening on http://{local}");
    let limits = listen::Limits {
        max_body: 1 << 20,
        max_headers: 64,
        header_timeout: Duration::from_secs(10),
        body_timeout: Duration::from_secs(10),
        max_connections: 256,
        max_pending: 256,
        quick_precheck: std::env::var_os("HTTP_FLOOR_BLOCKING").is_none() && pg.is_none(),
    };
    let handler: Arc<listen::Handler> = Arc::new(move |parts, body| {
        if let (Some(pg), true) = (&pg, parts.method == hyper::Method::POST) {
            pg.lock()
                .expect("not poisoned")
                .create(body.as_deref().unwrap_or_default());
        }
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
