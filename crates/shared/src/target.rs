//! Where a shared store is: `postgres://USER[:PASSWORD]@HOST[:PORT]/DB?store=NAME`
//! (libpq's URL form; any other parameter of it, such as `sslmode` or
//! `connect_timeout`, passes through). A password comes from the URL, else
//! `PGPASSWORD`, else the password file (`PGPASSFILE`, or `~/.pgpass`),
//! as libpq looks for one; a user and host missing from the URL come from
//! `PGUSER`/`USER` and `PGHOST` (else `localhost`).

use std::str::FromStr;

/// A shared store: its database and its name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL without `store` (and, when shown, without the password).
    url: String,
    pub store: StoreName,
}

/// A store's name, checked: 1 to 64 ASCII letters, digits, '-', '_' or
/// '.'. Only [`StoreName::parse`] makes one, so a value of this type can go
/// into SQL text as a literal ([`StoreName::literal`]) with nothing to
/// escape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreName(String);

/// A shared store's URL, or a store's name, that memfs cannot take.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("a shared store is named by a postgres:// URL")]
    NotAUrl,
    #[error("the URL names no store: add ?store=NAME (one database holds many stores)")]
    NoStore,
    #[error("a store's name is 1 to 64 letters, digits, '-', '_' or '.' (store=NAME in the URL)")]
    BadStoreName,
    #[error("the URL of the shared store is not one PostgreSQL takes: {0}")]
    NotPostgres(#[source] postgres::Error),
    #[error("a stores root in PostgreSQL is named by a postgres:// URL")]
    RootNotAUrl,
    #[error("--stores names a database, not one store: drop ?store=... (each store of the root is one of its shared stores)")]
    RootNamesAStore,
}

impl StoreName {
    pub fn parse(name: &str) -> Result<StoreName, TargetError> {
        match is_store_name(name) {
            true => Ok(StoreName(name.to_string())),
            false => Err(TargetError::BadStoreName),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an SQL string literal.
    pub fn literal(&self) -> String {
        format!("'{}'", self.0)
    }
}

impl std::fmt::Display for StoreName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `--data` names a shared store rather than a data dir.
pub fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

impl Target {
    /// Parses a `postgres://` URL with its `store=NAME`.
    pub fn parse(text: &str) -> Result<Target, TargetError> {
        if !is_url(text) {
            return Err(TargetError::NotAUrl);
        }
        let (base, query) = match text.split_once('?') {
            Some((b, q)) => (b, q),
            None => (text, ""),
        };
        let mut store = None;
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("store", name)) => store = Some(name.to_string()),
                _ => rest.push(pair),
            }
        }
        let store = store.ok_or(TargetError::NoStore)?;
        let store = StoreName::parse(&store)?;
        let url = match rest.is_empty() {
            true => base.to_string(),
            false => format!("{base}?{}", rest.join("&")),
        };
        postgres::Config::from_str(&url).map_err(TargetError::NotPostgres)?;
        Ok(Target { url, store })
    }

    /// A database named by a `postgres://` URL without `store=`: a stores
    /// root there (`--stores postgres://...`), each store in it one of its
    /// shared stores ([`Target::with_store`]).
    pub fn database(text: &str) -> Result<Target, TargetError> {
        if !is_url(text) {
            return Err(TargetError::RootNotAUrl);
        }
        let has_store = text
            .split_once('?')
            .is_some_and(|(_, q)| q.split('&').any(|p| p.starts_with("store=")));
        if has_store {
            return Err(TargetError::RootNamesAStore);
        }
        let mut target = Target::parse(&format!(
            "{text}{}store=_root",
            if text.contains('?') { "&" } else { "?" }
        ))?;
        target.store = StoreName("_root".into());
        Ok(target)
    }

    /// The database as it may be shown (no password, no store).
    pub fn shown_database(&self) -> String {
        let shown = self.shown();
        shown
            .split_once("?store=")
            .map_or(shown.clone(), |(db, _)| db.to_string())
    }

    /// What tells one database from another in this process (the URL
    /// without `store`; never shown: it may hold a password).
    pub fn database_key(&self) -> &str {
        &self.url
    }

    /// The store `store` in the same database.
    pub fn with_store(&self, store: StoreName) -> Target {
        Target {
            url: self.url.clone(),
            store,
        }
    }

    /// The connection settings, with the password found where libpq looks.
    pub fn config(&self) -> postgres::Config {
        let mut config = postgres::Config::from_str(&self.url).expect("checked when parsed");
        if config.get_user().is_none() {
            if let Ok(user) = std::env::var("PGUSER").or_else(|_| std::env::var("USER")) {
                config.user(&user);
            }
        }
        if config.get_hosts().is_empty() {
            config.host(std::env::var("PGHOST").as_deref().unwrap_or("localhost"));
        }
        if config.get_password().is_none() {
            if let Some(password) = password_for(&config) {
                config.password(password);
            }
        }
        config
    }

    /// The URL as it may be shown: no password.
    pub fn shown(&self) -> String {
        let config = self.config();
        let host = match config.get_hosts().first() {
            Some(postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "localhost".into(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        format!(
            "postgres://{}@{host}:{port}/{}?store={}",
            config.get_user().unwrap_or("?"),
            config
                .get_dbname()
                .unwrap_or(config.get_user().unwrap_or("?")),
            self.store
        )
    }

    /// A folder name for this host's copy of the store: the database's
    /// address and the store's name, nothing else.
    pub fn cache_name(&self) -> String {
        let shown = self.shown();
        let tail = shown.trim_start_matches("postgres://");
        let clean: String = tail
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '.' => c,
                _ => '_',
            })
            .collect();
        clean.chars().take(120).collect()
    }
}

/// A store's name: letters, digits, `-`, `_` and `.`, at most 64.
fn is_store_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A password from `PGPASSWORD`, else the first matching line of the
/// password file (`host:port:database:user:password`, `*` matching any).
fn password_for(config: &postgres::Config) -> Option<String> {
    if let Ok(p) = std::env::var("PGPASSWORD") {
        return Some(p);
    }
    let file = match std::env::var_os("PGPASSFILE") {
        Some(f) => std::path::PathBuf::from(f),
        None => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".pgpass"),
    };
    let text = std::fs::read_to_string(file).ok()?;
    let host = match config.get_hosts().first()? {
        postgres::config::Host::Tcp(h) => h.clone(),
        #[allow(unreachable_patterns)]
        _ => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    pgpass_lookup(&text, &[&host, &port, db, user])
}

/// The password of the first line of a password file whose four fields
/// match `want` (`*` matches anything; `\:` and `\\` are escapes).
fn pgpass_lookup(text: &str, want: &[&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_escaped(line);
        if fields.len() != 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(want)
            .all(|(f, w)| f == "*" || f == w)
        {
            return Some(fields[4].clone());
        }
    }
    None
}

fn split_escaped(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("one").push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("one").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store's name goes into SQL text (a literal in `Db::begin`): only a
    /// checked name can be made, and every name with a byte that would need
    /// escaping is refused (issue 39: the field was a public String).
    #[test]
    fn a_store_name_is_made_only_by_checking_it() {
        let long = "n".repeat(65);
        for bad in [
            "a'b",
            "",
            "x y",
            "a;DROP TABLE x",
            "a%27b",
            "é",
            "a\\b",
            long.as_str(),
        ] {
            assert!(StoreName::parse(bad).is_err(), "{bad:?}");
            let url = format!("postgres://u@h/db?store={bad}");
            assert!(Target::parse(&url).is_err(), "{url}");
        }
        let name = StoreName::parse("team-a.1_x").unwrap();
        assert_eq!(name.literal(), "'team-a.1_x'");
    }

    #[test]
    fn a_url_names_its_store_and_keeps_other_parameters() {
        let t =
            Target::parse("postgres://ann:pw@db.example:6543/mem?store=team-a&connect_timeout=3")
                .unwrap();
        assert_eq!(t.store.as_str(), "team-a");
        assert_eq!(
            t.url,
            "postgres://ann:pw@db.example:6543/mem?connect_timeout=3"
        );
        assert_eq!(t.shown(), "postgres://ann@db.example:6543/mem?store=team-a");
        assert!(!t.cache_name().contains('/'));
        assert!(matches!(
            Target::parse("postgres://ann@h/db"),
            Err(TargetError::NoStore)
        ));
        assert!(Target::parse("postgres://ann@h/db?store=../x").is_err());
        assert!(Target::parse("postgres://ann@h/db?store=").is_err());
    }

    #[test]
    fn the_password_file_is_read_as_libpq_reads_it() {
        let text = "# comment\nother:5432:*:*:no\ndb\\:x:*:mem:ann:s\\:cret\n*:*:*:*:fallback\n";
        assert_eq!(
            pgpass_lookup(text, &["db:x", "5432", "mem", "ann"]).as_deref(),
            Some("s:cret")
        );
        assert_eq!(
            pgpass_lookup(text, &["h", "1", "d", "u"]).as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_lookup("a:b:c:d:e\n", &["x", "b", "c", "d"]), None);
    }
}
