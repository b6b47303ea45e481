//! The memory tool over MCP's streamable HTTP transport (`POST /mcp`):
//! one JSON-RPC message per request, its answer as `application/json`;
//! `initialize` opens a session (`Mcp-Session-Id`), `DELETE` ends it, and
//! there is no server-initiated stream (`GET` is 405). The messages are
//! answered by the same MCP code as `memfs mcp` on stdio, against the one
//! store the connection names (`/mcp?store=ID`, or the one store its token
//! reaches); tool calls are credited to the `http` door and the session
//! the client named.
//!
//! A session's id says what it is (its store, its token's name, its
//! client) and is signed with a key (HMAC-SHA256): in a stores root in
//! PostgreSQL every server holds the catalog's key, so a session made on
//! one server is taken up by another the first time a request of it
//! arrives there (a load balancer need not keep a client on one server),
//! unless it was ended (`DELETE`) through any server: every request of a
//! session asks the catalog whether it was. On a local root the key is the
//! process's own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::digest::hex;
use crate::lock::{rank, Mutex};
use crate::serve::jsonrpc::Incoming;
use crate::serve::mcp_wire::{self, InitializeParams, Reply};

use super::catalog_pg::PgCatalog;
use super::error::{ApiError, ApiResult};
use super::registry::Registry;
use super::tokens::Token;
use crate::store::{Door, Origin};

/// Sessions idle this long are forgotten (their client starts a new one).
const SESSION_IDLE: Duration = Duration::from_secs(3600);
/// The most sessions kept at once; when full, a new session is refused
/// (503), never made by dropping another token's.
const MAX_SESSIONS: usize = 10_000;
/// The most sessions one token keeps: its next one drops its own oldest,
/// so that no token's sessions crowd out another's.
const PER_TOKEN: usize = 1_000;
/// A session made this long ago is no longer taken up by another server
/// (the catalog keeps ended sessions as long, `PgCatalog::end_mcp_session`).
const ADOPT_WITHIN: Duration = Duration::from_secs(7 * 24 * 3600);

struct Session {
    store: String,
    token: String,
    client: Option<String>,
    last: Instant,
}

pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
    max: usize,
    per_token: usize,
    /// What session ids are signed with.
    key: Vec<u8>,
    /// Where sessions ended through any server are noted (a root in
    /// PostgreSQL).
    catalog: Option<Arc<PgCatalog>>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::with_caps(MAX_SESSIONS, PER_TOKEN)
    }
}

/// A part of a session's id (`RANDOM.STORE.TOKEN.CLIENT.MAC`, each part
/// hex) read back.
fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) || text.len() > 512 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// What goes back: a status, the session id to send, and a body.
pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
    pub body: Option<Reply>,
}

impl Sessions {
    fn with_caps(max: usize, per_token: usize) -> Sessions {
        let mut key = [0u8; 32];
        // (No randomness: a key no other server holds is as good.)
        let _ = super::tokens::random(&mut key);
        Sessions {
            map: Mutex::new(rank::HTTP_MCP_SESSIONS, HashMap::new()),
            max,
            per_token,
            key: key.to_vec(),
            catalog: None,
        }
    }

    /// Sessions every server of a root in PostgreSQL takes up: signed with
    /// the catalog's key, ended for all through it.
    pub fn across(catalog: Arc<PgCatalog>) -> Result<Sessions, super::catalog::CatalogError> {
        Ok(Sessions {
            key: catalog.secret()?,
            catalog: Some(catalog),
            ..Sessions::default()
        })
    }

    fn sign(&self, parts: &str) -> String {
        hex(&crate::digest::hmac_sha256(&self.key, parts.as_bytes()))
    }

    /// The session an id signed here (or by a server with the same key)
    /// names: its store, token and client.
    fn read_id(&self, id: &str) -> Option<Session> {
        let (body, mac) = id.rsplit_once('.')?;
        if !crate::digest::same(self.sign(body).as_bytes(), mac.as_bytes()) {
            return None;
        }
        let mut parts = body.split('.');
        let (random, store, token, client) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // Made when (seconds, hex, after 32 random digits): an id older
        // than the catalog keeps its ended ones is taken up no more.
        let made = u64::from_str_radix(random.get(32..)?, 16).ok()?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if now.saturating_sub(made) > ADOPT_WITHIN.as_secs() {
            return None;
        }
        let client = unhex(client)?;
        Some(Session {
            store: unhex(store)?,
            token: unhex(token)?,
            client: (!client.is_empty()).then_some(client),
            last: Instant::now(),
        })
    }

    /// A session of `token`'s this server has not seen: taken up if its id
    /// is signed with the key and it was not ended through any server.
    fn adopt(&self, id: &str, token: &Token) -> ApiResult<Option<Session>> {
        // Only servers of one catalog take up each other's sessions; on a
        // local root a session this server forgot (ended, idle) is gone.
        if self.catalog.is_none() {
            return Ok(None);
        }
        let Some(session) = self.read_id(id).filter(|s| s.token == token.name) else {
            return Ok(None);
        };
        if self.ended(id)? {
            return Ok(None);
        }
        Ok(Some(session))
    }

    pub fn expire(&self) {
        self.map
            .lock()
            .retain(|_, s| s.last.elapsed() < SESSION_IDLE);
    }

    fn open(&self, store: &str, token: &str, client: Option<String>) -> ApiResult<String> {
        let mut bytes = [0u8; 16];
        super::tokens::random(&mut bytes)
            .map_err(|_| ApiError::internal("no randomness for a session id"))?;
        let client: Option<String> = client.map(|c| c.chars().take(64).collect());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let body = format!(
            "{}{now:x}.{}.{}.{}",
            hex(&bytes),
            hex(store.as_bytes()),
            hex(token.as_bytes()),
            hex(client.as_deref().unwrap_or("").as_bytes())
        );
        let id = format!("{body}.{}", self.sign(&body));
        self.keep(id.clone(), store, token, client)?;
        Ok(id)
    }

    /// Keeps a session in this server's map (within the caps).
    fn keep(&self, id: String, store: &str, token: &str, client: Option<String>) -> ApiResult<()> {
        let mut map = self.map.lock();
        let own = map.values().filter(|s| s.token == token).count();
        if own >= self.per_token {
            let oldest = map
                .iter()
                .filter(|(_, s)| s.token == token)
                .min_by_key(|(_, s)| s.last)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        } else if map.len() >= self.max {
            return Err(ApiError::unavailable(
                "this server holds as many MCP sessions as it keeps; try again later",
            ));
        }
        map.insert(
            id,
            Session {
                store: store.to_string(),
                token: token.to_string(),
                client,
                last: Instant::now(),
            },
        );
        Ok(())
    }

    /// Ends `token`'s session `id`, here and (in a root in PostgreSQL) on
    /// every server; whether there was one.
    pub fn close(&self, id: &str, token: &Token) -> ApiResult<bool> {
        let here = {
            let mut map = self.map.lock();
            match map.get(id) {
                Some(s) if s.token == token.name => map.remove(id).is_some(),
                _ => false,
            }
        };
        // (Through another server of the catalog, a session this one never
        // saw ends too; on a local root only one this server holds.)
        let known = here
            || (self.catalog.is_some() && self.read_id(id).is_some_and(|s| s.token == token.name));
        if let (true, Some(catalog)) = (known, &self.catalog) {
            catalog
                .end_mcp_session(id)
                .map_err(|e| ApiError::from_catalog(e, "the store's database cannot be reached"))?;
        }
        Ok(known)
    }

    /// The store and client of `token`'s session `id`: this server's, or
    /// one another server made (taken up now).
    fn find(&self, id: &str, token: &Token) -> ApiResult<Option<(String, Option<String>)>> {
        let held = {
            let mut map = self.map.lock();
            match map.get_mut(id) {
                Some(s) if s.token != token.name => return Ok(None),
                Some(s) => {
                    s.last = Instant::now();
                    Some((s.store.clone(), s.client.clone()))
                }
                None => None,
            }
        };
        let Some(held) = held else {
            let Some(s) = self.adopt(id, token)? else {
                return Ok(None);
            };
            self.keep(id.to_string(), &s.store, &s.token, s.client.clone())?;
            return Ok(Some((s.store, s.client)));
        };
        // Ended through another server since: ended here too.
        if self.ended(id)? {
            self.map.lock().remove(id);
            return Ok(None);
        }
        Ok(Some(held))
    }

    /// Whether session `id` was ended through any server (a root in
    /// PostgreSQL; one round trip).
    fn ended(&self, id: &str) -> ApiResult<bool> {
        match &self.catalog {
            Some(catalog) => catalog
                .mcp_session_ended(id)
                .map_err(|e| ApiError::from_catalog(e, "the store's database cannot be reached")),
            None => Ok(false),
        }
    }
}

/// The store a connection names: `?store=ID`, or the one store its token reaches.
fn store_of(token: &Token, asked: Option<&str>) -> ApiResult<String> {
    match asked {
        Some(id) if super::registry::is_store_id(id) && token.reaches(id) => Ok(id.to_string()),
        Some(id) => Err(ApiError::no_store(id)),
        None if !token.admin && token.stores.len() == 1 => Ok(token.stores[0].clone()),
        None => Err(ApiError::invalid(
            "name the store: /mcp?store=ID (the token reaches more than one)",
        )),
    }
}

/// Answers one POST to `/mcp`.
pub fn post(
    reg: &Registry,
    sessions: &Sessions,
    token: &Token,
    asked_store: Option<&str>,
    session_id: Option<&str>,
    body: &[u8],
) -> ApiResult<Answer> {
    // (Read once: only an `initialize` request opens a session.)
    let message = Incoming::parse(body);
    let init = match &message {
        Incoming::Request { method, params, .. } if method == "initialize" => {
            Some(mcp_wire::take::<InitializeParams>(params.clone()))
        }
        _ => None,
    };
    let (store, client, new_session) = match (session_id, init) {
        (_, Some(init)) => {
            let store = store_of(token, asked_store)?;
            if reg.meta(&store).is_none() {
                return Err(ApiError::no_store(&store));
            }
            let client = init.client_name().map(str::to_string);
            let id = sessions.open(&store, &token.name, client.clone())?;
            (store, client, Some(id))
        }
        (Some(id), _) => match sessions.find(id, token)? {
            Some((store, client)) if token.reaches(&store) => (store, client, None),
            // Unknown, ended, or another token's: the client starts anew.
            _ => return Err(ApiError::not_found("no such MCP session; initialize again")),
        },
        // No session (a probe, or a stateless client): answered as one.
        (None, _) => (store_of(token, asked_store)?, None, None),
    };
    let meta = reg.meta(&store).ok_or_else(|| ApiError::no_store(&store))?;
    let held = reg.hold(&meta.id)?;
    let label = client.unwrap_or_else(|| token.name.clone());
    let mut tool = held
        .memory
        .tool()
        .with_origin(Origin::session(Door::Http, Some(&label)));
    if !token.may_write() || meta.archived_at.is_some() {
        tool = tool.read_only();
    }
    let control = Some(held.memory.control().clone());
    let answer = crate::serve::mcp::answer_one(&tool, control, message);
    Ok(Answer {
        status: if answer.is_some() { 200 } else { 202 },
        session: new_session,
        body: answer,
    })
}

pub type Shared = Arc<Sessions>;

#[cfg(test)]
mod session_tests {
    use super::*;

    #[test]
    fn one_tokens_sessions_never_evict_anothers() {
        let sessions = Sessions::with_caps(6, 3);
        let victim = sessions.open("s", "victim", None).unwrap();
        // Another token opens many: it only ever drops its own oldest.
        let mut theirs = Vec::new();
        for _ in 0..10 {
            theirs.push(sessions.open("s", "other", None).unwrap());
        }
        let map = sessions.map.lock();
        assert!(
            map.contains_key(&victim),
            "the victim's session was evicted"
        );
        assert_eq!(map.values().filter(|s| s.token == "other").count(), 3);
        assert!(map.contains_key(theirs.last().unwrap()));
        assert!(!map.contains_key(&theirs[0]));
        drop(map);
        // Full: a new session is refused (503), nobody's is dropped.
        sessions.open("s", "third", None).unwrap();
        sessions.open("s", "fourth", None).unwrap();
        let full = sessions.open("s", "fifth", None).unwrap_err();
        assert_eq!(full.status, 503);
        assert!(sessions.map.lock().contains_key(&victim));
    }
}
