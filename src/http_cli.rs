//! `memfs --stores ROOT serve --http ADDR` and `memfs --stores ROOT token ...`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use memfs::http::{self, Access, Bounds, Config, SocketBounds, Tokens};

use crate::cli::{Cli, HttpArgs, TokenCmd};

/// A stores root: a directory, or a database.
enum Root {
    Dir(PathBuf),
    Database(memfs::shared::Target),
}

fn root_of(cli: &Cli) -> Result<Root, ExitCode> {
    match cli.common.stores.as_deref() {
        Some(root) if memfs::shared::is_url(&root.to_string_lossy()) => {
            match memfs::shared::Target::database(&root.to_string_lossy()) {
                Ok(target) => Ok(Root::Database(target)),
                Err(e) => {
                    memfs::say!("memfs: {e}");
                    Err(ExitCode::from(2))
                }
            }
        }
        Some(root) => Ok(Root::Dir(root.to_path_buf())),
        None => {
            memfs::say!("memfs: name the stores root with --stores ROOT (or MEMFS_STORES)");
            Err(ExitCode::from(2))
        }
    }
}

pub fn serve(cli: &Cli, addr: &str, options: &HttpArgs) -> ExitCode {
    let (root, database) = match root_of(cli) {
        Ok(Root::Dir(root)) => (root, None),
        // This server's copy of each store it opens.
        Ok(Root::Database(target)) => (
            cli.common
                .cache
                .clone()
                .unwrap_or_else(|| PathBuf::from("memory-shared").join(target.cache_name())),
            Some(target),
        ),
        Err(code) => return code,
    };
    let max_line = memfs::serve::max_line_bytes(cli.common.max_file_size);
    let timeout = Duration::from_secs(options.http_timeout.max(1));
    let config = Config {
        root,
        database,
        addr: addr.to_string(),
        options: cli.common.options(),
        bounds: Bounds {
            max_body: max_line,
            header_timeout: timeout,
            body_timeout: timeout,
            max_connections: options.http_max_connections,
            max_pending: options.http_max_pending,
            per_token: options.http_max_per_token,
            rate: options.http_rate,
            burst: options.http_burst,
            ..Bounds::default()
        },
        socket: SocketBounds {
            client_timeout: Duration::from_secs(cli.common.client_timeout),
            max_line,
        },
        idle: Duration::from_secs(options.store_idle),
        max_open: options.max_open_stores,
    };
    match http::run(config) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            memfs::say!("memfs: some store could not write everything out");
            ExitCode::FAILURE
        }
        Err(e) => {
            memfs::say!("memfs: {e}");
            ExitCode::from(2)
        }
    }
}

/// The tokens of the stores root `--stores` names (its state directory
/// made if missing); a root that cannot be opened is said, exit 2.
fn tokens_of(cli: &Cli) -> Result<Tokens, ExitCode> {
    match root_of(cli)? {
        Root::Dir(root) => {
            let state = root.join(".memfs");
            if let Err(e) = std::fs::create_dir_all(&state) {
                memfs::say!(
                    "memfs: cannot open the stores root: {}",
                    memfs::units::describe_io(&e)
                );
                return Err(ExitCode::from(2));
            }
            Ok(Tokens::new(&state))
        }
        Root::Database(target) => match http::catalog_pg::PgCatalog::open(target.clone()) {
            Ok(catalog) => Ok(Tokens::in_catalog(std::sync::Arc::new(catalog))),
            Err(e) => {
                memfs::say!(
                    "memfs: cannot open the stores root in {}: {e}",
                    target.shown_database()
                );
                Err(ExitCode::from(2))
            }
        },
    }
}

/// `token list`: a line a token, or a JSON object a line.
fn print_tokens(list: Vec<http::tokens::Token>, json: bool) {
    for t in list {
        let access = match t.access {
            Access::ReadOnly => "read_only",
            Access::ReadWrite => "read_write",
        };
        if json {
            crate::out!(
                "{}",
                serde_json::json!({"name": t.name, "admin": t.admin, "stores": t.stores, "access": access, "created_at": t.created_at})
            );
        } else {
            let reach = match t.admin {
                true => "admin, every store".to_string(),
                false => t.stores.join(","),
            };
            crate::out!("{}  {access}  {reach}  {}", t.name, t.created_at);
        }
    }
}

/// `memfs token create|list|revoke` on the stores root.
pub fn token(cli: &Cli, action: &TokenCmd) -> ExitCode {
    let tokens = match tokens_of(cli) {
        Ok(tokens) => tokens,
        Err(code) => return code,
    };
    let done = match action {
        TokenCmd::Create {
            name,
            admin,
            stores,
            read_only,
        } => {
            if let Some(bad) = stores.iter().find(|s| !http::registry::is_store_id(s)) {
                memfs::say!(
                    "memfs: `{}` is not a store id (memstore_...)",
                    memfs::text::label(bad)
                );
                return ExitCode::from(2);
            }
            if !admin && stores.is_empty() {
                memfs::say!("memfs: a token reaches the stores named with --store ID, or all of them with --admin");
                return ExitCode::from(2);
            }
            let access = match read_only {
                true => Access::ReadOnly,
                false => Access::ReadWrite,
            };
            tokens
                .create(name.as_deref(), *admin, stores.clone(), access)
                .map(|secret| crate::out!("{secret}"))
        }
        TokenCmd::List { json } => tokens.list().map(|list| print_tokens(list, *json)),
        TokenCmd::Revoke { name } => tokens.revoke(name),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            memfs::say!("memfs: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `memfs --stores ROOT mirror URL [--name NAME]`: a store of the root
/// whose data dir is a cache of the store over HTTP at URL, of the same
/// id, filled now (so that the key and the store are checked before
/// anything is kept); prints its id. Nothing is left of it if that fails.
pub fn mirror(cli: &Cli, url: &str, name: Option<&str>) -> ExitCode {
    let root = match root_of(cli) {
        Ok(Root::Dir(root)) => root,
        Ok(Root::Database(_)) => {
            memfs::say!("memfs: a stores root in PostgreSQL holds no mirror of a store over HTTP");
            return ExitCode::from(2);
        }
        Err(code) => return code,
    };
    let url = match memfs::remote::StoreUrl::parse(url, cli.common.insecure_http) {
        Ok(url) => url,
        Err(e) => {
            memfs::say!("memfs: {e}");
            return ExitCode::from(2);
        }
    };
    let options = cli.common.options();
    let Some(cache) = options.for_cache_of(url.clone()) else {
        memfs::say!("memfs: no key settings for the store");
        return ExitCode::from(2);
    };
    let socket = SocketBounds {
        client_timeout: Duration::from_secs(cli.common.client_timeout),
        max_line: memfs::serve::max_line_bytes(cli.common.max_file_size),
    };
    let registry = match http::registry::Registry::open(&root, options, socket, Duration::ZERO) {
        Ok(registry) => registry,
        Err(e) => {
            memfs::say!(
                "memfs: cannot open the stores root: {}",
                memfs::units::describe_io(&e)
            );
            return ExitCode::from(2);
        }
    };
    let meta = match registry.create_mirror(&url.store, name.unwrap_or(&url.store).to_string()) {
        Ok(meta) => meta,
        Err(e) => {
            memfs::say!("memfs: {}", e.message);
            return ExitCode::from(2);
        }
    };
    match memfs::Memory::open(root.join(&meta.id), cache) {
        Ok(memory) => {
            let written = memory.write_out();
            drop(memory);
            if !written {
                memfs::say!("memfs: the mirror's cache could not be written out whole");
                return ExitCode::FAILURE;
            }
            println!("{}", meta.id);
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = registry.delete(&meta.id);
            memfs::say!("memfs: {e}; no store was added");
            ExitCode::from(2)
        }
    }
}
