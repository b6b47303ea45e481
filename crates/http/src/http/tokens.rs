//! The server's tokens: `ROOT/.memfs/tokens.json`, each kept as the sha256
//! of its secret (the secret is shown once, when it is made), with the
//! stores it may reach and whether it may write. `memfs token` changes the
//! file (atomically, under a lock) while a server runs; the server reads it
//! again whenever it changed (told by the kernel: `dir_watch.rs`). In a stores root in PostgreSQL, the tokens
//! are rows of its catalog instead (`catalog_pg.rs`), read on every request.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::catalog::CatalogError;
use crate::lock::{rank, Mutex};
use serde::{Deserialize, Serialize};

use crate::digest::Sha;

/// What a token may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    pub name: String,
    /// The sha256 of the secret, in hex.
    pub sha256: String,
    /// Manages stores (create, update, archive, delete) and reaches all of them.
    #[serde(default)]
    pub admin: bool,
    /// The stores it reaches (an admin token reaches every store).
    #[serde(default)]
    pub stores: Vec<String>,
    /// `read_write` or `read_only`, as the hosted API's attachments say it.
    pub access: Access,
    pub created_at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    ReadWrite,
    ReadOnly,
}

impl Token {
    pub fn reaches(&self, store: &str) -> bool {
        self.admin || self.stores.iter().any(|s| s == store)
    }

    pub fn may_write(&self) -> bool {
        self.access == Access::ReadWrite
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    tokens: Vec<Token>,
}

/// A token name: 1 to 64 of `A-Z a-z 0-9 . _ -` (it is an actor in the
/// history and a key of rate limits).
pub fn check_name(name: &str) -> Result<(), CatalogError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    match ok {
        true => Ok(()),
        false => Err(CatalogError::Refused(format!(
            "`{}` is not a token name: 1 to 64 letters, digits, `.`, `_` or `-`",
            crate::text::label(name)
        ))),
    }
}

pub use crate::digest::random;

/// What the token file looked like when it was read: mtime, inode, size.
type Stamp = Option<(i64, i64, u64, u64)>;

/// The server's copy of the token file.
#[derive(Default)]
struct Cached {
    /// What the file looked like when read (none: not read yet, or not there).
    stamp: Stamp,
    /// The tokens by the sha256 of their secrets.
    tokens: HashMap<String, Token>,
    /// The file's directory watched, from the first lookup (a `memfs
    /// token` command never looks up, and watches nothing).
    watch: Option<super::dir_watch::DirWatch>,
}

/// The token file of a stores root, and the server's copy of it.
pub struct Tokens {
    path: PathBuf,
    lock: PathBuf,
    /// The tokens as last read, and what the file looked like then.
    cached: Mutex<Cached>,
    /// The catalog that holds them instead, for a root in PostgreSQL.
    catalog: Option<std::sync::Arc<dyn TokenStore>>,
}

/// Where a root keeps its tokens when not in its token file (a database:
/// `catalog_pg.rs`).
pub trait TokenStore: Send + Sync {
    /// The token whose secret hashes to `sha256`.
    fn token(&self, sha256: &str) -> Result<Option<Token>, CatalogError>;
    fn tokens(&self) -> Result<Vec<Token>, CatalogError>;
    /// Adds one; an error if its name is taken.
    fn add_token(&self, token: &Token) -> Result<(), CatalogError>;
    /// Revokes the one named `name`; false if there is none.
    fn revoke(&self, name: &str) -> Result<bool, CatalogError>;
}

/// The name a new token gets: the one asked for (checked), else the first
/// `token-N` free among `taken`.
fn name_among(asked: Option<&str>, taken: &[Token]) -> Result<String, CatalogError> {
    let name = match asked {
        Some(n) => n.to_string(),
        None => (1..)
            .map(|i| format!("token-{i}"))
            .find(|n| !taken.iter().any(|t| &t.name == n))
            .expect("some name is free"),
    };
    check_name(&name)?;
    Ok(name)
}

impl Tokens {
    pub fn new(state: &Path) -> Tokens {
        Tokens {
            path: state.join("tokens.json"),
            lock: state.join("tokens.lock"),
            cached: Mutex::new(rank::TOKENS, Cached::default()),
            catalog: None,
        }
    }

    /// The tokens of a stores root in PostgreSQL.
    pub fn in_catalog(catalog: std::sync::Arc<dyn TokenStore>) -> Tokens {
        Tokens {
            path: PathBuf::new(),
            lock: PathBuf::new(),
            cached: Mutex::new(rank::TOKENS, Cached::default()),
            catalog: Some(catalog),
        }
    }

    fn read_file(&self) -> io::Result<Vec<Token>> {
        match fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice::<File>(&bytes)
                .map(|f| f.tokens)
                .map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the token file is damaged: {e}"),
                    )
                }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The token whose secret is `secret`, if any (read again if the file changed).
    pub fn find(&self, secret: &str) -> Result<Option<Token>, CatalogError> {
        if let Some(catalog) = &self.catalog {
            return catalog.token(&Sha::of(secret.as_bytes()).hex());
        }
        let mut cached = self.cached.lock();
        let watch = cached.watch.get_or_insert_with(|| {
            super::dir_watch::DirWatch::on(self.path.parent().unwrap_or(Path::new(".")))
        });
        // (Events read first, the file looked at after: a change whose call
        // returned before this request is seen now, and one that comes
        // after the look leaves an event for the next request.)
        if watch.changed() || cached.stamp.is_none() {
            // (Whatever fails here is tried again by the next request.)
            let before = cached.stamp.take();
            let stamp = match fs::metadata(&self.path) {
                Ok(m) => Some((m.mtime(), m.mtime_nsec(), m.ino(), m.len())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(e.into()),
            };
            if before != stamp || stamp.is_none() {
                cached.tokens = self
                    .read_file()?
                    .into_iter()
                    .map(|t| (t.sha256.clone(), t))
                    .collect();
            }
            cached.stamp = stamp;
        }
        // Looked up by the hash of what was presented: a lookup's time says
        // nothing an attacker could use (it cannot choose a hash's bytes),
        // and costs the same with 10 tokens or 100,000.
        let presented = Sha::of(secret.as_bytes()).hex();
        Ok(cached.tokens.get(&presented).cloned())
    }

    /// Changes the file under its lock: `change` gets the tokens and says
    /// what to answer.
    fn change<R>(
        &self,
        change: impl FnOnce(&mut Vec<Token>) -> Result<R, CatalogError>,
    ) -> Result<R, CatalogError> {
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&self.lock)?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(io::Error::from)?;
        let mut tokens = self.read_file()?;
        let answer = change(&mut tokens)?;
        let text = serde_json::to_vec_pretty(&File { tokens }).map_err(io::Error::from)?;
        super::atomic::write_atomic(&self.path, &text)?;
        Ok(answer)
    }

    /// Makes a token and returns its secret (the only time it is shown).
    pub fn create(
        &self,
        name: Option<&str>,
        admin: bool,
        stores: Vec<String>,
        access: Access,
    ) -> Result<String, CatalogError> {
        let mut bytes = [0u8; 32];
        random(&mut bytes)?;
        let secret = format!(
            "memfs_{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let made = |name: String| Token {
            name,
            sha256: Sha::of(secret.as_bytes()).hex(),
            admin,
            stores: stores.clone(),
            access,
            created_at: crate::journal::now_text(),
        };
        if let Some(catalog) = &self.catalog {
            catalog.add_token(&made(name_among(name, &catalog.tokens()?)?))?;
            return Ok(secret);
        }
        self.change(|tokens| {
            let name = name_among(name, tokens)?;
            if tokens.iter().any(|t| t.name == name) {
                return Err(CatalogError::Refused(format!(
                    "a token named {name} exists; revoke it first, or pick another --name"
                )));
            }
            tokens.push(made(name));
            Ok(())
        })?;
        Ok(secret)
    }

    /// Every token (their hashes left out).
    pub fn list(&self) -> Result<Vec<Token>, CatalogError> {
        if let Some(catalog) = &self.catalog {
            return catalog.tokens();
        }
        Ok(self.read_file()?)
    }

    pub fn revoke(&self, name: &str) -> Result<(), CatalogError> {
        let none = || CatalogError::Refused(format!("no token named {}", crate::text::label(name)));
        if let Some(catalog) = &self.catalog {
            return match catalog.revoke(name)? {
                true => Ok(()),
                false => Err(none()),
            };
        }
        self.change(|tokens| {
            let before = tokens.len();
            tokens.retain(|t| t.name != name);
            match tokens.len() < before {
                true => Ok(()),
                false => Err(none()),
            }
        })
    }
}
