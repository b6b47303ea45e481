//! The memory tool over MCP's streamable HTTP transport (`POST /mcp`):
//! one JSON-RPC message per request, its answer as `application/json`;
//! `initialize` opens a session (`Mcp-Session-Id`), `DELETE` ends it, and
//! there is no server-initiated stream (`GET` is 405). The messages are
//! answered by the same MCP code as `memfs mcp` on stdio, against the one
//! store the connection names (`/mcp?store=ID`, or the one store its token
//! reaches); tool calls are credited to the `http` door and the session
//! the client named.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lock::{rank, Mutex};
use serde_json::Value;

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
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::with_caps(MAX_SESSIONS, PER_TOKEN)
    }
}

/// What goes back: a status, the session id to send, and a body.
pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
    pub body: Option<Value>,
}

impl Sessions {
    fn with_caps(max: usize, per_token: usize) -> Sessions {
        Sessions {
            map: Mutex::new(rank::HTTP_MCP_SESSIONS, HashMap::new()),
            max,
            per_token,
        }
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
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
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
            id.clone(),
            Session {
                store: store.to_string(),
                token: token.to_string(),
                client,
                last: Instant::now(),
            },
        );
        Ok(id)
    }

    pub fn close(&self, id: &str, token: &Token) -> bool {
        let mut map = self.map.lock();
        match map.get(id) {
            Some(s) if s.token == token.name => map.remove(id).is_some(),
            _ => false,
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
    let message: Value = crate::json::parse(body).unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str);
    let (store, client, new_session) = match (session_id, method) {
        (_, Some("initialize")) => {
            let store = store_of(token, asked_store)?;
            if reg.meta(&store).is_none() {
                return Err(ApiError::no_store(&store));
            }
            let client = message
                .pointer("/params/clientInfo/name")
                .and_then(Value::as_str)
                .map(str::to_string);
            let id = sessions.open(&store, &token.name, client.clone())?;
            (store, client, Some(id))
        }
        (Some(id), _) => {
            let mut map = sessions.map.lock();
            match map.get_mut(id) {
                Some(s) if s.token == token.name && token.reaches(&s.store) => {
                    s.last = Instant::now();
                    (s.store.clone(), s.client.clone(), None)
                }
                // Unknown, expired, or another token's: the client starts anew.
                _ => return Err(ApiError::not_found("no such MCP session; initialize again")),
            }
        }
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
    let answer = crate::serve::mcp::answer_one(&tool, body);
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
