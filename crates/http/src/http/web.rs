//! The page for people on the HTTP server (`/web/`): a person logs in with
//! a token (a form; the token never goes in a URL), and gets the page of
//! one store under `/web/STORE_ID/`, the same page `memfs web` serves. The
//! session is an HttpOnly, SameSite=Strict cookie bound to the token and the
//! store; a revoked token ends it, and a read-only token's session reads.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lock::{rank, Mutex};
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::HeaderValue;
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};

use super::registry::{is_store_id, Registry};
use super::tokens::Tokens;
use crate::control::request::{handle, Reply};
use crate::listen::{Body, BodyError};
use crate::web::{html::esc, session, App, Source};

const CSP: &str = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const IDLE: Duration = Duration::from_secs(12 * 3600);
const COOKIE: &str = "memfs_web_http";

struct Login {
    secret: String,
    /// The token's name (its logins are bounded together).
    name: String,
    store: String,
    csrf: String,
    last: Instant,
}

/// Logins one token may make a minute.
const LOGINS_A_MINUTE: usize = 30;
/// Sessions one token keeps (its next login ends the one used longest ago).
const SESSIONS_PER_TOKEN: usize = 16;

pub struct WebDoor {
    logins: Mutex<HashMap<String, Login>>,
    /// When each token's logins of the last minute were made.
    recent: Mutex<HashMap<String, Vec<Instant>>>,
    pages: Mutex<HashMap<String, Arc<App>>>,
}

impl Default for WebDoor {
    fn default() -> Self {
        WebDoor {
            logins: Mutex::new(rank::WEB_LOGINS, HashMap::new()),
            recent: Mutex::new(rank::WEB_RECENT_LOGINS, HashMap::new()),
            pages: Mutex::new(rank::WEB_PAGES, HashMap::new()),
        }
    }
}

fn page(status: u16, body: String, extra: &[(&str, String)]) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let h = r.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    crate::listen::add_headers(h, extra);
    r
}

fn too_large() -> Response<Body> {
    page(
        413,
        login_form("That form is larger than this page takes."),
        &[("connection", "close".into())],
    )
}

/// The store a login asks for.
enum Chosen {
    Store(String),
    /// None the token could reach.
    Nothing,
    /// The token reaches several and the form names none.
    Several,
}

/// The store a login is for: the one named, else the token's only one
/// (an admin's in a root of one store).
fn chosen_store(
    reg: &Registry,
    token: &super::tokens::Token,
    form: &HashMap<String, String>,
) -> Chosen {
    let asked = form
        .get("store")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty());
    match asked {
        Some(s) => Chosen::Store(s.to_string()),
        None if !token.admin && token.stores.len() == 1 => Chosen::Store(token.stores[0].clone()),
        // An admin token in a root of one store reaches one store too.
        None if token.admin && reg.count() == 1 => {
            let (only, _) = reg.list(&super::metas::Query {
                after: None,
                include_archived: true,
                created_gte: None,
                created_lte: None,
                limit: 1,
                only: None,
            });
            match only.first() {
                Some(m) => Chosen::Store(m.id.clone()),
                None => Chosen::Nothing,
            }
        }
        None => Chosen::Several,
    }
}

/// The answer to a login: to the store's page, with the session's cookie.
fn signed_in(store: &str, id: &str, tls: bool) -> Response<Body> {
    page(
        303,
        String::new(),
        &[
            ("location", format!("/web/{store}/")),
            (
                "set-cookie",
                format!(
                    "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/web{}",
                    if tls { "; Secure" } else { "" }
                ),
            ),
        ],
    )
}

fn login_form(said: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>memfs: log in</title><link rel=\"icon\" href=\"/web/static/favicon.svg\"><link rel=\"stylesheet\" href=\"/web/static/app.css\"></head><body><header><a class=\"brand\" href=\"/web/\">memfs</a></header><main><h1>Log in</h1><p>{}</p><form method=\"post\" action=\"/web/login\" class=\"login\"><p><label>Token<br><input type=\"password\" name=\"token\" autocomplete=\"off\" required></label></p><p><label>Store<br><input name=\"store\" placeholder=\"memstore_... (if the token reaches several)\"></label></p><p><button type=\"submit\">Log in</button></p></form></main></body></html>",
        esc(said)
    )
}

/// A static file of the page's, for the login form too.
fn asset(path: &str) -> Response<Body> {
    let (kind, body) = match path {
        "/web/static/app.css" => ("text/css; charset=utf-8", crate::web::APP_CSS),
        _ => ("image/svg+xml", crate::web::FAVICON),
    };
    let mut r = page(200, body.to_string(), &[]);
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static(kind));
    r
}

/// Whether a TLS proxy in front says the request came over TLS (then the
/// cookie is sent over TLS only).
fn behind_tls(parts: &Parts) -> bool {
    parts
        .headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"))
}

/// The largest login form, and the largest form of a logged-in page.
const LOGIN_BODY: usize = 8 << 10;
const FORM_BODY: usize = 64 << 10;

impl WebDoor {
    /// Looks at a request under `/web` before its body is read: a page to
    /// GET takes no body, a login a small form, and any other POST only
    /// from a live session of that store (else the login page at once, the
    /// body never read).
    pub fn precheck(&self, parts: &Parts, tokens: &Tokens) -> Result<usize, Box<Response<Body>>> {
        if parts.method != hyper::Method::POST {
            return Ok(0);
        }
        let path = parts.uri.path();
        if path == "/web/login" {
            return Ok(LOGIN_BODY);
        }
        let store = path
            .strip_prefix("/web/")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default();
        let cookie = parts.headers.get("cookie").and_then(|v| v.to_str().ok());
        match self.check(tokens, session::cookie(cookie, COOKIE), store) {
            Some(_) => Ok(FORM_BODY),
            None => Err(Box::new(page(
                401,
                login_form("Log in to see this store."),
                &[("connection", "close".into())],
            ))),
        }
    }

    /// Answers a request under `/web`: the login form and its assets, the
    /// login, then a store's page behind its session's checks.
    pub fn answer(
        &self,
        reg: &Arc<Registry>,
        tokens: &Tokens,
        parts: Parts,
        body: Result<Vec<u8>, BodyError>,
    ) -> Response<Body> {
        let path = parts.uri.path().to_string();
        match (parts.method.as_str(), path.as_str()) {
            ("GET", "/web" | "/web/") => {
                return page(200, login_form("Log in with a memfs token."), &[])
            }
            ("GET", "/web/static/app.css" | "/web/static/favicon.svg") => return asset(&path),
            ("POST", _) if matches!(body, Err(BodyError::TooLarge)) => return too_large(),
            ("POST", "/web/login") => return self.login_post(reg, tokens, &parts, body),
            _ => {}
        }
        let Some(rest) = path.strip_prefix("/web/") else {
            return page(404, login_form("No such page."), &[]);
        };
        self.store_page(reg, tokens, rest, parts, body)
    }

    /// `POST /web/login`: refused from another site, else the form's login.
    fn login_post(
        &self,
        reg: &Arc<Registry>,
        tokens: &Tokens,
        parts: &Parts,
        body: Result<Vec<u8>, BodyError>,
    ) -> Response<Body> {
        let foreign = parts
            .headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|s| s != "same-origin" && s != "none");
        if foreign {
            let refused = login_form("A login from another site is refused.");
            return page(403, refused, &[]);
        }
        let form = body
            .ok()
            .and_then(|b| crate::form::parse(&String::from_utf8_lossy(&b)))
            .unwrap_or_default();
        self.log_in(reg, tokens, &form, behind_tls(parts))
    }

    /// A store's page (`/web/STORE/...`, `rest` past `/web/`) behind its
    /// session's checks: its store, a live token, writes only for a token
    /// that may.
    fn store_page(
        &self,
        reg: &Arc<Registry>,
        tokens: &Tokens,
        rest: &str,
        parts: Parts,
        body: Result<Vec<u8>, BodyError>,
    ) -> Response<Body> {
        let store = rest.split('/').next().unwrap_or_default().to_string();
        let cookie = parts.headers.get("cookie").and_then(|v| v.to_str().ok());
        let Some((csrf, writes, name)) =
            self.check(tokens, session::cookie(cookie, COOKIE), &store)
        else {
            return page(401, login_form("Log in to see this store."), &[]);
        };
        if parts.method == hyper::Method::POST && !writes {
            return page(
                403,
                login_form("This token is read-only: it cannot change the memory."),
                &[],
            );
        }
        match self.page_of(reg, &store) {
            Ok(app) => {
                let who = format!("page:{name}");
                let checked = crate::web::Checked {
                    csrf: &csrf,
                    who: &who,
                };
                app.respond_as(parts, body, Some(checked))
            }
            Err(e) => page(503, login_form(&e.to_string()), &[]),
        }
    }

    /// One login in order: find the token, choose the store, check the
    /// token reaches it, make the session, record it, redirect with the
    /// cookie; each step can refuse with its own page.
    fn log_in(
        &self,
        reg: &Registry,
        tokens: &Tokens,
        form: &HashMap<String, String>,
        tls: bool,
    ) -> Response<Body> {
        let secret = form
            .get("token")
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        let refused = || {
            page(
                403,
                login_form("That token is not valid, or does not reach that store."),
                &[],
            )
        };
        let Ok(Some(token)) = tokens.find(&secret) else {
            return refused();
        };
        let store = match chosen_store(reg, &token, form) {
            Chosen::Store(store) => store,
            Chosen::Nothing => return refused(),
            Chosen::Several => {
                return page(
                    400,
                    login_form("Name the store: this token reaches several."),
                    &[],
                )
            }
        };
        if !is_store_id(&store) || !token.reaches(&store) || reg.meta(&store).is_none() {
            return refused();
        }
        let (Ok(id), Ok(csrf)) = (session::secret(), session::secret()) else {
            return page(503, login_form("No randomness for a session."), &[]);
        };
        if !self.may_log_in(&token.name) {
            return page(
                429,
                login_form(
                    "Too many logins with this token in the last minute; try again in a minute.",
                ),
                &[("retry-after", "60".into())],
            );
        }
        self.keep(
            id.clone(),
            Login {
                secret,
                name: token.name.clone(),
                store: store.clone(),
                csrf,
                last: Instant::now(),
            },
        );
        signed_in(&store, &id, tls)
    }

    /// Whether token `name` may log in now: at most LOGINS_A_MINUTE a
    /// minute (this one counted when it may).
    fn may_log_in(&self, name: &str) -> bool {
        let mut recent = self.recent.lock();
        recent.retain(|_, times| {
            times.retain(|t| t.elapsed() < Duration::from_secs(60));
            !times.is_empty()
        });
        let times = recent.entry(name.to_string()).or_default();
        if times.len() >= LOGINS_A_MINUTE {
            return false;
        }
        times.push(Instant::now());
        true
    }

    /// Keeps session `id`: a token's SESSIONS_PER_TOKEN newest are kept,
    /// its oldest let go.
    fn keep(&self, id: String, login: Login) {
        let mut logins = self.logins.lock();
        logins.retain(|_, l| l.last.elapsed() < IDLE);
        let own: Vec<(&String, Instant)> = logins
            .iter()
            .filter(|(_, l)| l.name == login.name)
            .map(|(k, l)| (k, l.last))
            .collect();
        if own.len() >= SESSIONS_PER_TOKEN {
            if let Some(oldest) = own
                .iter()
                .min_by_key(|(_, last)| *last)
                .map(|(k, _)| (*k).clone())
            {
                logins.remove(&oldest);
            }
        }
        logins.insert(id, login);
    }

    /// The session's CSRF token and whether it may write, if it is live,
    /// for this store, and its token still valid.
    fn check(
        &self,
        tokens: &Tokens,
        cookie: Option<&str>,
        store: &str,
    ) -> Option<(String, bool, String)> {
        let id = cookie?;
        let (secret, csrf) = {
            let mut logins = self.logins.lock();
            let (_, login) = logins.iter_mut().find(|(k, _)| session::same(k, id))?;
            if login.store != store || login.last.elapsed() >= IDLE {
                return None;
            }
            login.last = Instant::now();
            (login.secret.clone(), login.csrf.clone())
        };
        let token = tokens.find(&secret).ok()??;
        token
            .reaches(store)
            .then(|| (csrf, token.may_write(), token.name.clone()))
    }

    fn page_of(&self, reg: &Arc<Registry>, store: &str) -> Result<Arc<App>, crate::web::PageError> {
        if let Some(app) = self.pages.lock().get(store) {
            return Ok(app.clone());
        }
        let (reg2, id) = (reg.clone(), store.to_string());
        let source = Source::Door(Box::new(move |request| match reg2.hold(&id) {
            Ok(held) => handle(held.memory.store(), held.memory.control(), request),
            Err(e) => Reply::error(e.message),
        }));
        let app = Arc::new(App::at(
            source,
            &reg.data_dir(store).join(".memfs"),
            format!("/web/{store}"),
        )?);
        self.pages.lock().insert(store.to_string(), app.clone());
        Ok(app)
    }
}
