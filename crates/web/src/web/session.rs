//! Who may use the page (`memfs web`).
//!
//! - **Where it is.** Every page of one instance is under a path of its own,
//!   `/p/KEY` (KEY random per instance): a browser sends a `127.0.0.1`
//!   cookie to every port of that host, so the session is bound to the
//!   instance beyond its cookie. A request must carry both the cookie and
//!   the instance's path; another local program that is sent the cookie
//!   (its name, `memfs_web_PORT`, and its `Path` are this instance's) does
//!   not know the path, and two pages side by side keep their own sessions.
//! - **Logging in.** A login link is signed (HMAC-SHA256 with a key of the
//!   instance's) and valid for [`LINK_VALID`], as many times as it is
//!   opened in that time; `memfs web --link` signs a fresh one for the
//!   running page (the key is in the data dir's `.memfs/web.json`, which
//!   only the memory's owner can read).
//! - **Bounds.** At most [`LOGINS_PER_MINUTE`] logins a minute and
//!   [`MAX_SESSIONS`] sessions (the one used longest ago ends first); a
//!   session unused for [`IDLE`] ends.
//! - Each session has a CSRF token that every POST must carry.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use crate::lock::{rank, Mutex};

/// Sessions unused this long end.
const IDLE: Duration = Duration::from_secs(12 * 3600);
/// A login link works this long after it is made.
pub const LINK_VALID: Duration = Duration::from_secs(15 * 60);
/// The most sessions kept at once.
const MAX_SESSIONS: usize = 16;
/// The most logins taken a minute (each makes a session).
const LOGINS_PER_MINUTE: usize = 30;

pub struct Session {
    pub csrf: String,
    last: Instant,
}

pub struct Sessions {
    /// Signs login links.
    link_key: String,
    /// This instance's path, `/p/KEY`: every page is under it.
    base: String,
    /// The session cookie's name, `memfs_web_PORT`.
    cookie: String,
    map: Mutex<HashMap<String, Session>>,
    /// When the logins of the last minute were taken.
    logins: Mutex<Vec<Instant>>,
}

pub fn secret() -> Result<String, super::PageError> {
    crate::digest::random_hex(24).map_err(super::PageError::NoRandomness)
}

/// Compares two secrets in constant time ([`crate::digest::same`]).
pub fn same(a: &str, b: &str) -> bool {
    crate::digest::same(a.as_bytes(), b.as_bytes())
}

/// What an instance keeps in `.memfs/web.json` for `memfs web --link`.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Instance {
    pub pid: u32,
    pub url: String,
    pub base: String,
    pub link_key: String,
}

impl Instance {
    /// A login link for this instance, valid for [`LINK_VALID`] from now.
    pub fn link(&self) -> String {
        let until = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            + LINK_VALID.as_secs();
        format!(
            "{}{}/login?t={until}.{}",
            self.url,
            self.base,
            sign(&self.link_key, until)
        )
    }
}

fn sign(key: &str, until: u64) -> String {
    crate::digest::hex(&crate::digest::hmac_sha256(
        key.as_bytes(),
        format!("login {until}").as_bytes(),
    ))
}

/// Why a login was refused.
pub enum Refused {
    /// Not a link of this instance's, or past its time.
    Link,
    /// Over [`LOGINS_PER_MINUTE`].
    TooMany,
}

impl Sessions {
    /// The sessions of an instance listening on `port`.
    pub fn new(port: u16) -> Result<Sessions, super::PageError> {
        Ok(Sessions {
            link_key: secret()?,
            base: format!("/p/{}", &secret()?[..32]),
            cookie: format!("memfs_web_{port}"),
            map: Mutex::new(rank::WEB_SESSION_MAP, HashMap::new()),
            logins: Mutex::new(rank::WEB_SESSION_LOGIN, Vec::new()),
        })
    }

    /// What `memfs web --link` needs to sign a link for this instance at `url`.
    pub fn instance(&self, url: &str) -> Instance {
        Instance {
            pid: std::process::id(),
            url: url.to_string(),
            base: self.base.clone(),
            link_key: self.link_key.clone(),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn cookie_name(&self) -> &str {
        &self.cookie
    }

    /// The `Set-Cookie` value for session `id`.
    pub fn cookie_for(&self, id: &str) -> String {
        format!(
            "{}={id}; HttpOnly; SameSite=Strict; Path={}",
            self.cookie, self.base
        )
    }

    /// Trades a login link's `t` (`UNTIL.MAC`) for a new session's id.
    pub fn log_in(&self, t: &str) -> Result<String, Refused> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let valid = t.split_once('.').is_some_and(|(until, mac)| {
            until
                .parse::<u64>()
                .is_ok_and(|u| u >= now && same(&sign(&self.link_key, u), mac))
        });
        if !valid {
            return Err(Refused::Link);
        }
        {
            let mut logins = self.logins.lock();
            logins.retain(|t| t.elapsed() < Duration::from_secs(60));
            if logins.len() >= LOGINS_PER_MINUTE {
                return Err(Refused::TooMany);
            }
            logins.push(Instant::now());
        }
        let id = secret().map_err(|_| Refused::Link)?;
        let csrf = secret().map_err(|_| Refused::Link)?;
        let mut map = self.map.lock();
        map.retain(|_, s| s.last.elapsed() < IDLE);
        while map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .min_by_key(|(_, s)| s.last)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => map.remove(&k),
                None => break,
            };
        }
        map.insert(
            id.clone(),
            Session {
                csrf,
                last: Instant::now(),
            },
        );
        Ok(id)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_works_until_its_time_and_only_for_its_instance() {
        let a = Sessions::new(1).unwrap();
        let b = Sessions::new(2).unwrap();
        let link = a.instance("http://127.0.0.1:1").link();
        let t = link.split_once("?t=").unwrap().1;
        assert!(a.log_in(t).is_ok());
        assert!(a.log_in(t).is_ok(), "usable again while valid");
        assert!(matches!(b.log_in(t), Err(Refused::Link)), "not b's");
        let (until, mac) = t.split_once('.').unwrap();
        let later = format!("{}.{mac}", until.parse::<u64>().unwrap() + 1);
        assert!(
            matches!(a.log_in(&later), Err(Refused::Link)),
            "time is signed"
        );
        let past = format!("1.{}", sign(&a.link_key, 1));
        assert!(matches!(a.log_in(&past), Err(Refused::Link)), "expired");
        assert_ne!(a.cookie_name(), b.cookie_name());
        assert_ne!(a.base(), b.base());
    }

    #[test]
    fn logins_are_rate_limited_and_sessions_bounded() {
        let a = Sessions::new(1).unwrap();
        let link = a.instance("http://x").link();
        let t = link.split_once("?t=").unwrap().1;
        let ids: Vec<String> = (0..LOGINS_PER_MINUTE)
            .map(|_| a.log_in(t).ok().unwrap())
            .collect();
        assert!(matches!(a.log_in(t), Err(Refused::TooMany)));
        assert!(a.map.lock().len() <= MAX_SESSIONS);
        assert!(a.check(ids.last().map(String::as_str)).is_some());
        assert!(a.check(Some(&ids[0])).is_none(), "the oldest ended");
    }
}
