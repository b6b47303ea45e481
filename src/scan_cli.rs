//! `memfs scan`: the credentials the memory holds on disk, in files, in
//! names and in the versions the history keeps. Reads the data dir whether
//! or not a memfs runs on it.

use std::path::Path;
use std::process::ExitCode;

/// `memfs scan`: exit 0 when nothing is found, 1 when something is, 2 when
/// the path or the data dir cannot be read.
pub fn scan(data: &Path, at: &str, json: bool) -> ExitCode {
    let at = match memfs::path::MemPath::parse(at) {
        Ok(at) => at,
        Err(e) => {
            memfs::say!("memfs: invalid path `{}`: {e}", memfs::text::clip(at));
            return ExitCode::from(2);
        }
    };
    let tree = match memfs::persist::load::read_only(data) {
        Ok(tree) => tree,
        Err(e) => {
            memfs::say!("memfs: cannot read the data dir {}: {e}", data.display());
            return ExitCode::from(2);
        }
    };
    let found = report_tree(&tree, &at, json);
    let in_history = report_history(data, &tree, &at, json);
    if in_history > 0 && !json {
        memfs::say!("memfs: versions in the history hold credentials too; `memfs redact VERSION` erases one");
    }
    if found == 0 && in_history == 0 {
        if !json {
            memfs::say!(
                "memfs: nothing found that looks like a credential, in the files or the history"
            );
        }
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints what the files hold now; returns how many findings.
fn report_tree(tree: &memfs::store::Tree, at: &memfs::path::MemPath, json: bool) -> usize {
    let found = memfs::guard::scan_tree(tree, at);
    for found in &found {
        let (path, f) = (&found.shown, &found.finding);
        match (json, found.in_name) {
            (true, true) => crate::out!(
                "{}",
                serde_json::json!({"path": path, "name": true, "kind": f.kind})
            ),
            (true, false) => crate::out!(
                "{}",
                serde_json::json!({"path": path, "line": f.line, "kind": f.kind})
            ),
            (false, true) => crate::out!("{path}: {} in the name", f.kind),
            (false, false) => crate::out!("{path}:{}: {}", f.line, f.kind),
        }
    }
    found.len()
}

/// Prints what every version the history keeps holds (a credential an
/// edit removed is still in the version before it), but the versions that
/// are the files as they are now; returns how many findings.
fn report_history(
    data: &Path,
    tree: &memfs::store::Tree,
    at: &memfs::path::MemPath,
    json: bool,
) -> usize {
    let mut in_history = 0;
    for (rows, data) in memfs::journal::kept_contents(data).unwrap_or_default() {
        let Ok(text) = std::str::from_utf8(&data) else {
            continue;
        };
        let findings = memfs::guard::secrets::scan(text);
        // A version that is the file as it is now was reported above.
        let current = |path: &memfs::path::MemPath| {
            tree.resolve(path)
                .ok()
                .and_then(|ino| match &tree.node(ino).kind {
                    memfs::store::NodeKind::File(now) => Some(memfs::digest::sha256_hex(now)),
                    _ => None,
                })
        };
        for row in rows.iter().filter(|r| {
            !memfs::path::is_tool_state(&r.path)
                && memfs::path::MemPath::parse(&r.path)
                    .is_ok_and(|p| p.starts_with(at) && current(&p).as_ref() != r.sha256.as_ref())
        }) {
            for f in &findings {
                in_history += 1;
                if json {
                    crate::out!(
                        "{}",
                        serde_json::json!({"version": row.version, "path": memfs::guard::shown_path(&row.path), "line": f.line, "kind": f.kind})
                    );
                } else {
                    crate::out!(
                        "version {} {}:{}: {}",
                        row.version,
                        memfs::guard::shown_path(&row.path),
                        f.line,
                        f.kind
                    );
                }
            }
        }
    }
    in_history
}
