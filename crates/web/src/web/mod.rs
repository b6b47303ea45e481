//! A page for people (`memfs --data DIR web`): what the agent remembers,
//! what it changed, and undoing it. Server-rendered HTML with a little
//! JavaScript (no build step, nothing from the internet), under a strict
//! Content-Security-Policy; a one-time login URL trades for an HttpOnly,
//! SameSite session cookie, and every change is a POST carrying the
//! session's CSRF token. Everything the page does goes through the history
//! commands every door shares (`memfs log`, `diff`, `undo`, `redact`),
//! credited to the person who runs it.

pub mod conflicts;
pub mod error;
pub mod html;
pub mod model;
pub mod pages;
pub mod review;
pub mod session;
pub mod source;

pub use error::PageError;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::lock::{rank, Mutex};
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::HeaderValue;
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};

use crate::listen::{self, Body, BodyError};
use model::{Model, Reviewed};
use pages::{Ctx, View};
use session::Sessions;
pub use source::Source;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const APP_JS: &str = include_str!("static/app.js");
/// The page's stylesheet (also the `serve --http` login form's).
pub const APP_CSS: &str = include_str!("static/app.css");
/// The page's icon.
pub const FAVICON: &str = include_str!("static/favicon.svg");

pub struct App {
    /// Where the page is mounted in its server's URLs (`""`, or `/web/STORE_ID`).
    base: String,
    /// Who acts through this page when its server does not say
    /// (`page:LOGIN`, the person running `memfs web`).
    who: String,
    source: Source,
    model: Mutex<Model>,
    /// Where the model read the journal up to.
    cursor: Mutex<Option<crate::journal::Cursor>>,
    reviewed: Mutex<Reviewed>,
    /// Its own logins (`memfs web`); none when its server checks who asks.
    sessions: Option<Sessions>,
    hide: crate::tool::Hide,
}

/// One answer.
struct Page {
    status: u16,
    kind: &'static str,
    body: Vec<u8>,
    headers: Vec<(&'static str, String)>,
}

impl Page {
    fn html(status: u16, body: String) -> Page {
        Page {
            status,
            kind: "text/html; charset=utf-8",
            body: body.into_bytes(),
            headers: Vec::new(),
        }
    }

    fn asset(kind: &'static str, text: &str) -> Page {
        Page {
            status: 200,
            kind,
            body: text.as_bytes().to_vec(),
            headers: vec![("cache-control", "no-cache".into())],
        }
    }

    /// Plain text, with no link in it.
    fn plain(status: u16, text: &str) -> Page {
        Page {
            status,
            kind: "text/plain; charset=utf-8",
            body: text.as_bytes().to_vec(),
            headers: Vec::new(),
        }
    }

    fn redirect(to: &str) -> Page {
        Page {
            status: 303,
            kind: "text/plain; charset=utf-8",
            body: Vec::new(),
            headers: vec![("location", to.to_string())],
        }
    }

    fn text(status: u16, text: &str) -> Page {
        Page::html(
            status,
            shell(
                "memfs",
                &format!("<p class=\"error\">{}</p>", html::esc(text)),
                0,
                0,
            ),
        )
    }
}

fn shell(title: &str, main: &str, head: u64, review: usize) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>memfs: {}</title><link rel=\"icon\" href=\"/static/favicon.svg\"><link rel=\"stylesheet\" href=\"/static/app.css\"><script src=\"/static/app.js\" defer></script></head><body><header><a class=\"brand\" href=\"/\">memfs</a><a href=\"/\">memory</a><a href=\"/history\">history</a><a href=\"/review\">review <span id=\"review-count\">{review}</span></a><a href=\"/deleted\">deleted</a><form class=\"search\" action=\"/search\" method=\"get\" role=\"search\"><input type=\"search\" name=\"q\" placeholder=\"search\" aria-label=\"search the memory\"></form><span id=\"live\" class=\"live\">live</span></header><main id=\"main\" data-head=\"{head}\" data-base=\"\">{main}</main></body></html>",
        html::esc(title)
    )
}

/// `/login?t=...` of `memfs web`: a session for a valid link.
fn log_in(sessions: &Sessions, t: &str) -> Page {
    match sessions.log_in(t) {
        Ok(id) => Page {
            headers: vec![
                ("location", "/".into()),
                ("set-cookie", sessions.cookie_for(&id)),
            ],
            ..Page::redirect("/")
        },
        Err(session::Refused::Link) => Page::text(403, "this login link is not valid, or its time is up; `memfs web --link` prints a fresh one for the running page"),
        Err(session::Refused::TooMany) => Page::text(429, "too many logins in the last minute; try again in a minute"),
    }
}

/// A request its server checked: the CSRF token its session's forms carry,
/// and who acts, as the log shall name them (`page:TOKEN`).
#[derive(Clone, Copy)]
pub struct Checked<'a> {
    pub csrf: &'a str,
    pub who: &'a str,
}

/// A version number a query or form names.
fn version(q: &HashMap<String, String>, key: &str) -> Option<u64> {
    q.get(key).and_then(|v| v.parse::<u64>().ok())
}

/// A path inside the page to go back to after a POST (never another site).
fn back(to: Option<&String>) -> String {
    match to {
        Some(t) if t.starts_with('/') && !t.starts_with("//") && !t.contains('\\') => t.clone(),
        _ => "/review".into(),
    }
}

/// `/head`: the next version and how many changes wait for review (the
/// page polls it).
fn head(next: u64, review: usize) -> Page {
    Page {
        status: 200,
        kind: "application/json",
        body: serde_json::json!({"next": next, "review": review})
            .to_string()
            .into_bytes(),
        headers: vec![("cache-control", "no-store".into())],
    }
}

/// `/raw`: a version's bytes as they are (an image as its kind, anything
/// else as text), sandboxed.
fn raw(source: &Source, row: Option<&crate::journal::Row>) -> Page {
    let Some(row) = row else {
        return Page::text(404, "no such version");
    };
    let lower = row.path.to_ascii_lowercase();
    let kind = match lower.rsplit('.').next() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "text/plain; charset=utf-8",
    };
    match source.content(row) {
        Ok(bytes) => Page {
            status: 200,
            kind,
            body: bytes,
            headers: vec![(
                "content-security-policy",
                "default-src 'none'; sandbox".into(),
            )],
        },
        Err(e) => Page::text(404, &e.to_string()),
    }
}

impl App {
    /// The page for `memfs web` listening on `port`, with its logins
    /// (every page under the instance's own path, see `session.rs`).
    pub fn new(source: Source, state_dir: &std::path::Path, port: u16) -> Result<App, PageError> {
        let sessions = Sessions::new(port)?;
        let base = sessions.base().to_string();
        App::mounted(source, state_dir, base, Some(sessions))
    }

    /// What `memfs web --link` needs to sign a login link for this page at
    /// `url` (none on a server that checks who asks itself).
    pub fn instance(&self, url: &str) -> Option<session::Instance> {
        self.sessions.as_ref().map(|s| s.instance(url))
    }

    /// The page at `base` of a server that checks who asks itself
    /// ([`App::respond_as`]).
    pub fn at(source: Source, state_dir: &std::path::Path, base: String) -> Result<App, PageError> {
        App::mounted(source, state_dir, base, None)
    }

    fn mounted(
        source: Source,
        state_dir: &std::path::Path,
        base: String,
        sessions: Option<Sessions>,
    ) -> Result<App, PageError> {
        let app = App {
            base,
            source,
            model: Mutex::new(rank::WEB_MODEL, Model::default()),
            cursor: Mutex::new(rank::WEB_CURSOR, None),
            reviewed: Mutex::new(rank::WEB_REVIEWED, Reviewed::load(state_dir)),
            sessions,
            hide: model::scratch(),
            who: format!("page:{}", source::login_name()),
        };
        app.refresh()?;
        Ok(app)
    }

    /// Takes in the versions made since the last look (all of them again
    /// after a redaction or compaction rewrote the journal).
    fn refresh(&self) -> Result<(), PageError> {
        let mut cursor = *self.cursor.lock();
        let got = self.source.since(&mut cursor)?;
        let mut model = self.model.lock();
        if got.all {
            *model = Model::default();
        }
        model.take(got.next, got.rows);
        model.stuck = got.stuck;
        *self.cursor.lock() = cursor;
        Ok(())
    }

    fn reload(&self) -> Result<(), PageError> {
        *self.cursor.lock() = None;
        self.refresh()
    }

    fn answer(
        &self,
        parts: &Parts,
        body: Result<Vec<u8>, BodyError>,
        checked: Option<Checked>,
    ) -> Page {
        // (The path first: outside the page's own path, plain text, never
        // the page's shell, whose links would carry its secret path; a bad
        // query there too.)
        let path = match parts.uri.path().strip_prefix(self.base.as_str()) {
            Some("") => "/",
            Some(p) if p.starts_with('/') => p,
            _ if self.sessions.is_some() => return Page::plain(404, "no such page: the page's address is in the login link memfs web printed (`memfs web --link` prints a fresh one)\n"),
            _ => return Page::plain(404, "no such page\n"),
        };
        let query = match crate::form::parse(parts.uri.query().unwrap_or("")) {
            Some(q) => q,
            None => return Page::text(400, "the query string is not valid"),
        };
        match path {
            "/static/app.js" => return Page::asset("text/javascript; charset=utf-8", APP_JS),
            "/static/app.css" => return Page::asset("text/css; charset=utf-8", APP_CSS),
            "/static/favicon.svg" => return Page::asset("image/svg+xml", FAVICON),
            "/login" => {
                if let Some(sessions) = &self.sessions {
                    return log_in(sessions, query.get("t").map(String::as_str).unwrap_or(""));
                }
            }
            _ => {}
        }
        let cookie = parts.headers.get("cookie").and_then(|v| v.to_str().ok());
        let who = checked.map_or(self.who.clone(), |c| c.who.to_string());
        let csrf = match (&self.sessions, checked) {
            (_, Some(c)) => Some(c.csrf.to_string()),
            (Some(sessions), None) => {
                sessions.check(session::cookie(cookie, sessions.cookie_name()))
            }
            (None, None) => None,
        };
        let Some(csrf) = csrf else {
            return Page::text(
                401,
                "log in with the link memfs web printed (`memfs web --link` prints a fresh one)",
            );
        };
        if let Err(e) = self.refresh() {
            return Page::text(503, &e.to_string());
        }
        let said = query.get("said").cloned();
        let ctx = Ctx {
            csrf: &csrf,
            said: said.as_deref(),
        };
        if parts.method == hyper::Method::POST {
            return self.post(path, parts, body, &csrf, &who);
        }
        self.get(path, &query, &ctx)
    }

    /// The changes of the review queue's groups (a file, a session, all
    /// shown) marked reviewed.
    fn keep_groups(&self, field: Option<&String>, to: &str) -> Page {
        let groups = review::groups_of(field);
        let n = self.mark_groups(&groups);
        let said = format!("kept {n} change{}", if n == 1 { "" } else { "s" });
        let sep = if to.contains('?') { '&' } else { '?' };
        Page::redirect(&format!("{to}{sep}said={}", crate::form::encode(&said)))
    }

    /// The review queue's groups taken back (each a session's changes
    /// since its first to review, to one file or all), and off the queue.
    fn undo_groups(&self, field: Option<&String>, to: &str, who: &str) -> Page {
        let groups = review::groups_of(field);
        if groups.is_empty() {
            return Page::text(400, "which changes?");
        }
        let mut said = Vec::new();
        let mut done = Vec::new();
        for g in &groups {
            match self.source.undo_by(&g.by, &g.versions, who) {
                Ok(s) => {
                    said.extend(s.lines().map(str::to_string));
                    done.push(g.clone());
                }
                Err(e) => said.push(format!("not done: {e}")),
            }
        }
        let _ = self.reload();
        self.mark_groups(&done);
        let said = said.join("; ");
        let sep = if to.contains('?') { '&' } else { '?' };
        Page::redirect(&format!("{to}{sep}said={}", crate::form::encode(&said)))
    }

    /// Marks every agent's change the groups hold reviewed; how many.
    fn mark_groups(&self, groups: &[review::Group]) -> usize {
        let versions: Vec<u64> = {
            let model = self.model.lock();
            model
                .rows
                .iter()
                .filter(|r| model::is_agents_change(r) && groups.iter().any(|g| g.holds(r)))
                .map(crate::journal::Row::id)
                .collect()
        };
        let mut reviewed = self.reviewed.lock();
        let fresh = versions
            .iter()
            .filter(|v| !reviewed.versions.contains(v))
            .count();
        let _ = reviewed.mark_all(&versions);
        fresh
    }

    /// What a form on version `v` asks (`/keep`, `/undo`, `/use`,
    /// `/redact`), done; none for a form of no such action.
    fn act_on(&self, path: &str, v: u64, who: &str) -> Option<Result<String, PageError>> {
        Some(match path {
            "/keep" => self
                .reviewed
                .lock()
                .mark(v)
                .map(|()| format!("version {v} kept")),
            "/undo" => self.source.undo(v, who).inspect(|_| {
                let _ = self.reviewed.lock().mark(v);
            }),
            // (A conflict settled for the text it was saved over: the
            // overwrite reverted, and settled.)
            "/use" => self.source.revert(v, who).inspect(|_| {
                let _ = self.reviewed.lock().mark(v);
            }),
            "/redact" => self.source.redact(v).inspect(|_| {
                let _ = self.reload();
            }),
            _ => return None,
        })
    }

    /// A keep, an undo or a redaction, from a form of this page.
    fn post(
        &self,
        path: &str,
        parts: &Parts,
        body: Result<Vec<u8>, BodyError>,
        csrf: &str,
        who: &str,
    ) -> Page {
        let Ok(body) = body else {
            return Page::text(400, "the form could not be read");
        };
        let form = crate::form::parse(&String::from_utf8_lossy(&body)).unwrap_or_default();
        if !form
            .get("csrf")
            .is_some_and(|given| session::same(given, csrf))
        {
            return Page::text(403, "this form is not from this page (its CSRF token is missing or wrong); nothing was changed");
        }
        if parts
            .headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|s| s != "same-origin" && s != "none")
        {
            return Page::text(
                403,
                "a POST from another site is refused; nothing was changed",
            );
        }
        let to = back(form.get("back"));
        match path {
            "/keep-groups" => return self.keep_groups(form.get("groups"), &to),
            "/undo-groups" => return self.undo_groups(form.get("groups"), &to, who),
            _ => {}
        }
        let Some(v) = version(&form, "version") else {
            return Page::text(400, "which version?");
        };
        let Some(result) = self.act_on(path, v, who) else {
            return Page::text(404, "no such page");
        };
        let said = match result {
            Ok(s) => s,
            Err(e) => format!("not done: {e}"),
        };
        let sep = if to.contains('?') { '&' } else { '?' };
        Page::redirect(&format!("{to}{sep}said={}", crate::form::encode(&said)))
    }

    /// The router: every GET page, under one model lock.
    fn get(&self, path: &str, query: &HashMap<String, String>, ctx: &Ctx) -> Page {
        // (A cache of a store over HTTP: what is not sent yet, on the
        // memory's and the history's pages; it reads the plain files, so
        // not under the model's lock.)
        let remote = match path {
            "/" | "/history" => self.remote_status(),
            _ => String::new(),
        };
        let model = self.model.lock();
        let reviewed = self.reviewed.lock().versions.clone();
        let review = review::waiting(&model, &reviewed);
        let hide = |n: &str| self.hide.hides(n);
        let view: Option<View> = match path {
            "/head" => return head(model.next, review),
            "/" => Some(pages::tree(&model, &hide, ctx)),
            "/file" => query
                .get("path")
                .map(|p| pages::file(&model, &self.source, p, ctx)),
            "/history" => Some(pages::history(&model, &hide, version(query, "before"), ctx)),
            "/deleted" => Some(pages::deleted(&model, &hide, ctx)),
            "/search" => Some(pages::search(
                &self.source,
                query.get("q").map_or("", String::as_str),
                ctx,
            )),
            "/review" => {
                let page = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(0);
                Some(review::review(&model, &self.source, &reviewed, page, ctx))
            }
            "/diff" => version(query, "version")
                .and_then(|v| model.row(v))
                .map(|row| {
                    let against = version(query, "against").and_then(|w| model.row(w));
                    pages::version(&model, &self.source, row, against, ctx)
                }),
            "/redact" => version(query, "version")
                .and_then(|v| model.row(v))
                .map(|row| pages::redact(&model, row, ctx)),
            "/raw" => {
                let row = version(query, "version").and_then(|v| model.row(v));
                return raw(&self.source, row);
            }
            _ => None,
        };
        let view = view.map(|mut v| {
            // (The conflicts open, with what settles each, at the top of
            // the memory's and the review's pages.)
            if matches!(path, "/" | "/review") {
                v.main
                    .insert_str(0, &conflicts::block(&model, &reviewed, ctx, path));
            }
            v.main.insert_str(0, &remote);
            v
        });
        match view {
            None => Page::text(404, "no such page"),
            Some(view) if query.contains_key("partial") => Page::html(200, view.main),
            Some(view) => Page::html(200, shell(&view.title, &view.main, model.next, review)),
        }
    }

    /// What `memfs log` says first of a cache of a store over HTTP (what
    /// is not sent, a refusal, the last conflicts), as paragraphs.
    fn remote_status(&self) -> String {
        let Some(dir) = self.source.data_dir() else {
            return String::new();
        };
        crate::remote::status::said(&dir)
            .iter()
            .map(|line| {
                format!(
                    "<p class=\"said remote\" role=\"status\">{}</p>",
                    html::esc(line)
                )
            })
            .collect()
    }

    fn respond(&self, parts: Parts, body: Result<Vec<u8>, BodyError>) -> Response<Body> {
        self.respond_as(parts, body, None)
    }

    /// Answers a request its server has already checked (`checked`: its
    /// session's CSRF token, and who acts).
    pub fn respond_as(
        &self,
        parts: Parts,
        body: Result<Vec<u8>, BodyError>,
        checked: Option<Checked>,
    ) -> Response<Body> {
        let page = self.rebased(self.answer(&parts, body, checked));
        let mut r = Response::new(Full::new(Bytes::from(page.body)));
        *r.status_mut() = StatusCode::from_u16(page.status).unwrap_or(StatusCode::OK);
        let h = r.headers_mut();
        let kind =
            HeaderValue::from_str(page.kind).unwrap_or(HeaderValue::from_static("text/plain"));
        h.insert("content-type", kind);
        h.insert("content-security-policy", HeaderValue::from_static(CSP));
        h.insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        h.insert("x-frame-options", HeaderValue::from_static("DENY"));
        h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
        h.insert("cache-control", HeaderValue::from_static("no-store"));
        for (k, v) in page.headers {
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.insert(k, v);
            }
        }
        r
    }
}

impl App {
    /// Its links, forms and redirects moved under `base` (every one the
    /// page makes starts `="/`; a memory's text is escaped, so it has no `"`).
    fn rebased(&self, mut page: Page) -> Page {
        if self.base.is_empty() {
            return page;
        }
        let b = &self.base;
        if page.kind.starts_with("text/html") {
            let html = String::from_utf8_lossy(&page.body)
                .replace("href=\"/", &format!("href=\"{b}/"))
                .replace("action=\"/", &format!("action=\"{b}/"))
                .replace("src=\"/", &format!("src=\"{b}/"))
                .replace("data-base=\"\"", &format!("data-base=\"{b}\""));
            page.body = html.into_bytes();
        }
        for (k, v) in page.headers.iter_mut() {
            if *k == "location" && v.starts_with('/') {
                *v = format!("{b}{v}");
            }
        }
        page
    }
}

/// Whether `addr` is a loopback address (the page binds nothing else).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Serves the page on `listener` until a signal; `tend` runs meanwhile.
pub fn serve(
    app: Arc<App>,
    listener: std::net::TcpListener,
    tend: Box<dyn Fn() + Send>,
) -> Result<(), listen::ListenError> {
    let limits = listen::Limits {
        max_body: 64 << 10,
        max_headers: 64 << 10,
        header_timeout: std::time::Duration::from_secs(10),
        body_timeout: std::time::Duration::from_secs(10),
        max_connections: 64,
        max_pending: 64,
        quick_precheck: false,
    };
    let handler = Arc::new(move |parts, body| app.respond(parts, body));
    listen::run(listener, limits, handler, None, tend)
}
