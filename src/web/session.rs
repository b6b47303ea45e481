//! Who may use the page: a one-time login token (printed by `memfs web`)
//! trades for a session cookie (HttpOnly, SameSite=Strict), and each
//! session has a CSRF token that every POST must carry.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::lock::{rank, Mutex};

use crate::digest::random;

/// Sessions unused this long end.
const IDLE: Duration = Duration::from_secs(12 * 3600);

pub struct Session {
    pub csrf: String,
    last: Instant,
}

pub struct Sessions {
    /// The login token, until it is used.
    login: Mutex<Option<String>>,
    map: Mutex<HashMap<String, Session>>,
}

pub fn secret() -> Result<String, String> {
    let mut bytes = [0u8; 24];
    random(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares two secrets in constant time ([`crate::digest::same`]).
pub fn same(a: &str, b: &str) -> bool {
    crate::digest::same(a.as_bytes(), b.as_bytes())
}

impl Sessions {
    pub fn new() -> Result<(Sessions, String), String> {
        let login = secret()?;
        Ok((
            Sessions {
                login: Mutex::new(rank::WEB_SESSION_LOGIN, Some(login.clone())),
                map: Mutex::new(rank::WEB_SESSION_MAP, HashMap::new()),
            },
            login,
        ))
    }

    /// Trades the login token for a new session's id (once).
    pub fn log_in(&self, token: &str) -> Option<String> {
        let mut login = self.login.lock();
        match login.as_deref() {
            Some(t) if same(t, token) => {}
            _ => return None,
        }
        *login = None;
        let id = secret().ok()?;
        let csrf = secret().ok()?;
        self.map.lock().insert(
            id.clone(),
            Session {
                csrf,
                last: Instant::now(),
            },
        );
        Some(id)
    }

    /// The CSRF token of the session `cookie` names, if it is live.
    pub fn check(&self, cookie: Option<&str>) -> Option<String> {
        let id = cookie?;
        let mut map = self.map.lock();
        map.retain(|_, s| s.last.elapsed() < IDLE);
        let found = map.iter_mut().find(|(k, _)| same(k, id))?;
        found.1.last = Instant::now();
        Some(found.1.csrf.clone())
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?.split(';').find_map(|part| {
        let (k, v) = part.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}
