//! Scans the Markdown, Rust, TOML and text files below the given
//! directories for credentials (the false-alarm corpus of docs/SECRETS.md):
//! prints each finding and the totals. usage: scan_corpus DIR...
//! `SCAN_EXT=py,md` scans files with those extensions instead.
fn main() {
    let exts: Vec<String> = std::env::var("SCAN_EXT")
        .unwrap_or_else(|_| "md,rs,txt,toml".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let mut files = 0;
    let mut bytes = 0;
    let mut findings = 0;
    let mut stack: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
            continue;
        }
        let is_doc = path
            .extension()
            .is_some_and(|e| exts.iter().any(|x| e == x.as_str()));
        if !is_doc {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        files += 1;
        bytes += text.len();
        for f in memfs::guard::secrets::scan(&text) {
            findings += 1;
            println!(
                "{}:{}: {} {:?}",
                path.display(),
                f.line,
                f.kind,
                &text[f.start..f.end.min(f.start + 60)]
            );
        }
    }
    println!("{files} files, {bytes} bytes, {findings} findings");
}
