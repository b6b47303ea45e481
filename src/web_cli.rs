//! `memfs --data DIR web [--listen ADDR]`: the page for one memory.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use memfs::fuse::Hosted;
use memfs::persist::OpenError;
use memfs::serve::socket::SocketServer;
use memfs::web::{App, Source};
use memfs::Memory;

use crate::cli::Cli;

/// A listener on `listen`, which must be loopback; else said, exit 2.
fn bind_loopback(listen: &str) -> Result<(std::net::TcpListener, std::net::SocketAddr), ExitCode> {
    let (listener, local) = match memfs::listen::bind(listen) {
        Ok(bound) => bound,
        Err(e) => {
            memfs::say!(
                "memfs: cannot listen on {listen}: {}",
                memfs::units::describe_io(&e)
            );
            return Err(ExitCode::from(2));
        }
    };
    if !memfs::web::is_loopback(&local) {
        memfs::say!("memfs: the page listens on loopback only (127.0.0.1 or ::1); to reach it from elsewhere, put an authenticating proxy in front");
        return Err(ExitCode::from(2));
    }
    Ok((listener, local))
}

/// The login link on stdout (the first line: the one address that opens
/// the page, the server's root answering nothing without a login), the
/// instance kept for `memfs web --link`, and how to get a fresh link.
/// Where the instance is kept.
fn announce(app: &App, data: &Path, local: std::net::SocketAddr) -> std::path::PathBuf {
    let port = local.port();
    let host = match local {
        std::net::SocketAddr::V6(_) => "[::1]".to_string(),
        std::net::SocketAddr::V4(v4) => v4.ip().to_string(),
    };
    let instance = app
        .instance(&format!("http://{host}:{port}"))
        .expect("memfs web's page has its own logins");
    // For `memfs web --link` (.memfs is the owner's alone, mode 0700).
    let kept = data.join(".memfs").join(INSTANCE);
    if let Err(e) = keep_instance(&kept, &instance) {
        memfs::say!(
            "memfs: cannot keep the page's login key ({e}); `memfs web --link` will not find it"
        );
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", instance.link());
    let _ = out.flush();
    drop(out);
    let again = match data == std::path::Path::new("./memory") {
        true => "memfs web --link".to_string(),
        false => format!("memfs --data {} web --link", data.display()),
    };
    memfs::say!("memfs: serving the page on {host}:{port}: open the login link above in a browser (it works for 15 minutes; `{again}` prints a fresh one); Ctrl-C to stop");
    kept
}

/// The kept instance removed, only if it is still this page's: a second
/// page on the data dir may have written its own since.
fn forget_instance(kept: &Path) {
    let ours = std::fs::read_to_string(kept)
        .ok()
        .and_then(|t| serde_json::from_str::<memfs::web::session::Instance>(&t).ok())
        .is_some_and(|i| i.pid == std::process::id());
    if ours {
        let _ = std::fs::remove_file(kept);
    }
}

/// `memfs web`, top to bottom: bind on loopback, open or attach, make the
/// app, print the login link, serve, tear down; most steps exit early with
/// their own message.
pub fn web(cli: &Cli, listen: &str) -> ExitCode {
    let data = &cli.common.data;
    // The page shows a memory that is there: it makes none (run in the
    // wrong directory, it would serve an empty page of a new `./memory`).
    if cli.common.shared.is_none() && !crate::history_cli::memory_at(data) {
        memfs::say!(
            "memfs: there is no memory at {} (memfs web shows an existing memory; name it with --data DIR)",
            data.display()
        );
        return ExitCode::from(2);
    }
    let (listener, local) = match bind_loopback(listen) {
        Ok(bound) => bound,
        Err(code) => return code,
    };
    let hosted = Arc::new(Hosted::default());
    let (source, mut owned) = match open_source(cli, &hosted) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let port = local.port();
    let app = match App::new(source, &data.join(".memfs"), port) {
        Ok(made) => made,
        Err(e) => {
            memfs::say!("memfs: {e}");
            return ExitCode::from(2);
        }
    };
    let kept = announce(&app, data, local);
    let tend = {
        let hosted = hosted.clone();
        Box::new(move || hosted.reap())
    };
    let served = memfs::web::serve(Arc::new(app), listener, tend);
    forget_instance(&kept);
    let mut code = ExitCode::SUCCESS;
    if let Err(e) = served {
        memfs::say!("memfs: {e}");
        code = ExitCode::FAILURE;
    }
    match owned
        .take()
        .map(|(memory, server)| close(&memory, server, &hosted))
    {
        Some(false) => ExitCode::FAILURE,
        _ => code,
    }
}

/// The memory the page shows: opened here (and served on its socket, so
/// that other memfs commands attach), or, when another memfs owns it, read
/// beside that owner.
fn open_source(cli: &Cli, hosted: &Arc<Hosted>) -> Result<(Source, Owned), ExitCode> {
    match Memory::open(&cli.common.data, cli.common.options()) {
        Ok(memory) => {
            let memory = Arc::new(memory);
            let server = match SocketServer::start(
                memory.tool().clone(),
                memory.control().clone(),
                &memory.data_dir().state,
                Duration::from_secs(cli.common.client_timeout),
                memfs::serve::max_line_bytes(cli.common.max_file_size),
                Some(hosted.clone()),
            ) {
                Ok(server) => server,
                Err(e) => {
                    memfs::say!("memfs: cannot serve the socket in the data dir: {e}");
                    return Err(ExitCode::from(2));
                }
            };
            Ok((Source::Owner(memory.clone()), Some((memory, server))))
        }
        Err(OpenError::Busy { .. }) => Ok((
            Source::Beside {
                state_dir: cli.common.data.join(".memfs"),
            },
            None,
        )),
        Err(e) => {
            memfs::say!("memfs: {e}");
            Err(ExitCode::from(2))
        }
    }
}

/// A memory this page opened, and the socket it serves it on.
type Owned = Option<(Arc<Memory>, SocketServer)>;

/// Closes what the page opened: false if a mount it hosted or a change
/// could not be finished.
fn close(memory: &Memory, mut server: SocketServer, hosted: &Hosted) -> bool {
    server.stop();
    let mut ok = hosted.unmount_all();
    if !memory.write_out() {
        memfs::say!("memfs: some changes could not be written to disk");
        ok = false;
    }
    ok
}

/// Where a running page keeps what `memfs web --link` signs with.
const INSTANCE: &str = "web.json";

fn keep_instance(at: &Path, instance: &memfs::web::session::Instance) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let text = serde_json::to_string(instance).map_err(std::io::Error::other)?;
    let tmp = at.with_extension("json.tmp");
    // (Made anew, so that its mode is 0600 whatever an earlier one had.)
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, at)
}

/// `memfs web --link`: a fresh login link for the page running on `data`.
pub fn link(data: &Path) -> ExitCode {
    let at = data.join(".memfs").join(INSTANCE);
    let instance = std::fs::read_to_string(&at)
        .ok()
        .and_then(|t| serde_json::from_str::<memfs::web::session::Instance>(&t).ok());
    // SAFETY: kill(2) with signal 0 sends nothing and touches no memory; it
    // only says whether the process exists.
    let alive = |pid: u32| {
        let sent = unsafe { libc::kill(pid as libc::pid_t, 0) };
        sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    };
    match instance {
        Some(i) if alive(i.pid) => {
            crate::out!("{}", i.link());
            ExitCode::SUCCESS
        }
        _ => {
            memfs::say!(
                "memfs: no page is running on {} (start one with `memfs --data {} web`)",
                data.display(),
                data.display()
            );
            ExitCode::from(2)
        }
    }
}
