//! The reference model of the memory tool: paths as `/memories/...`
//! strings mapped to entries, and the tool's commands run against it with
//! the spec's exact result strings. Shared by the property tests (model.rs,
//! power_loss.rs).

use std::collections::BTreeMap;

use memfs::store::{NodeKind, Tree};
use memfs::tool::human_size;
use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File(String),
}

/// The reference: paths as `/memories/...` strings, the root always present.
#[derive(Debug, Clone)]
pub struct Model {
    pub entries: BTreeMap<String, Entry>,
}

pub const ROOT: &str = "/memories";

pub fn parent(p: &str) -> &str {
    &p[..p.rfind('/').unwrap()]
}

pub fn children<'a>(
    m: &'a BTreeMap<String, Entry>,
    dir: &'a str,
) -> impl Iterator<Item = (&'a String, &'a Entry)> + 'a {
    m.iter()
        .filter(move |(p, _)| p.len() > dir.len() && p.starts_with(dir) && parent(p) == dir)
}

pub fn lines(text: &str) -> Vec<&str> {
    let mut l: Vec<&str> = text.split('\n').collect();
    if l.last() == Some(&"") {
        l.pop();
    }
    l
}

pub fn numbered(ls: &[&str], first: usize) -> String {
    ls.iter()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}", first + i))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Model {
    pub fn new() -> Self {
        Model {
            entries: BTreeMap::from([(ROOT.to_string(), Entry::Dir)]),
        }
    }

    pub fn size(&self, path: &str) -> u64 {
        self.entries
            .iter()
            .filter(|(p, _)| *p == path || p.starts_with(&format!("{path}/")))
            .map(|(_, e)| match e {
                Entry::File(t) => t.len() as u64,
                Entry::Dir => 0,
            })
            .sum()
    }

    /// Missing parents become directories; a file in the way is an error.
    pub fn parents_ok(&self, path: &str) -> bool {
        let mut p = parent(path);
        while p.len() >= ROOT.len() {
            if let Some(Entry::File(_)) = self.entries.get(p) {
                return false;
            }
            if p == ROOT {
                break;
            }
            p = parent(p);
        }
        true
    }

    pub fn make_parents(&mut self, path: &str) {
        let mut p = parent(path).to_string();
        while p != ROOT {
            self.entries.entry(p.clone()).or_insert(Entry::Dir);
            p = parent(&p).to_string();
        }
    }

    pub fn list(&self, dir: &str, prefix: &str, depth: usize, out: &mut Vec<String>) {
        for (p, e) in children(&self.entries, dir) {
            let name = &p[dir.len() + 1..];
            if name.starts_with('.') {
                continue;
            }
            let slash = if *e == Entry::Dir { "/" } else { "" };
            out.push(format!(
                "{}\t{ROOT}{prefix}/{name}{slash}",
                human_size(self.size(p))
            ));
            if *e == Entry::Dir && depth < 2 {
                self.list(p, &format!("{prefix}/{name}"), depth + 1, out);
            }
        }
    }

    pub fn run(&mut self, cmd: &Cmd) -> (bool, String) {
        let missing_view = |p: &str| {
            (
                true,
                format!("The path {p} does not exist. Please provide a valid path."),
            )
        };
        match cmd {
            Cmd::View(p, range) => match self.entries.get(p) {
                None => missing_view(p),
                Some(Entry::Dir) => {
                    let mut rows = Vec::new();
                    self.list(p, &p[ROOT.len()..], 1, &mut rows);
                    // view_range picks rows of a listing as it picks lines of a file.
                    if let Some((s, e)) = *range {
                        let n = rows.len() as i64;
                        let end = if e == -1 { n } else { e };
                        if !(1 <= s && s <= end && end <= n) {
                            return (true, format!("Error: Invalid `view_range` parameter: [{s}, {e}]. The directory {p} lists {n} entries; for a directory, `view_range` takes [first_entry, last_entry] with 1 <= first_entry <= last_entry <= {n}, or last_entry = -1 for the end of the listing."));
                        }
                        rows = rows[s as usize - 1..end as usize].to_vec();
                    }
                    let mut out = vec![format!("{}\t{p}", human_size(self.size(p)))];
                    out.extend(rows);
                    (false, format!("Here're the files and directories up to 2 levels deep in {p}, excluding hidden items and node_modules:\n{}", out.join("\n")))
                }
                Some(Entry::File(t)) => {
                    let ls = lines(t);
                    let (s, e) = match range {
                        None => (1, ls.len() as i64),
                        Some((s, e)) => (*s, if *e == -1 { ls.len() as i64 } else { *e }),
                    };
                    if range.is_some() && !(1 <= s && s <= e && e <= ls.len() as i64) {
                        let (rs, re) = range.unwrap();
                        return (true, format!("Error: Invalid `view_range` parameter: [{rs}, {re}]. The file {p} has {n} lines; `view_range` takes [start_line, end_line] with 1 <= start_line <= end_line <= {n}, or end_line = -1 for the end of the file.", n = ls.len()));
                    }
                    let shown = &ls[(s as usize).saturating_sub(1)..e as usize];
                    (false, format!("Here's the content of {p} with line numbers:\n{}", numbered(shown, s as usize)))
                }
            },
            Cmd::Create(p, text) => match self.entries.get(p) {
                Some(Entry::File(_)) => (true, format!("Error: File {p} already exists")),
                Some(Entry::Dir) => (true, format!("Error: {p} is a directory; create writes files only")),
                None if !self.parents_ok(p) => (true, format!("Error: Cannot create {p}: a component of its path is a file, not a directory")),
                None => {
                    self.make_parents(p);
                    self.entries.insert(p.clone(), Entry::File(text.clone()));
                    (false, format!("File created successfully at: {p}"))
                }
            },
            Cmd::Replace(p, old, new) => {
                let Some(Entry::File(t)) = self.entries.get(p) else {
                    return (true, format!("Error: The path {p} does not exist. Please provide a valid path."));
                };
                let hits: Vec<usize> = (0..t.len()).filter(|&i| t.is_char_boundary(i) && t[i..].starts_with(old.as_str())).collect();
                match hits.len() {
                    0 => (true, format!("No replacement was performed, old_str `{old}` did not appear verbatim in {p}.")),
                    1 => {
                        let at = hits[0];
                        let out = format!("{}{new}{}", &t[..at], &t[at + old.len()..]);
                        let first = out[..at].matches('\n').count() + 1;
                        let last_byte = at + new.len().saturating_sub(1);
                        let last = (out.as_bytes()[..last_byte].iter().filter(|&&b| b == b'\n').count() + 1).max(first);
                        let ls = lines(&out);
                        let from = first.saturating_sub(4).max(1);
                        let to = (last + 4).min(ls.len());
                        let snippet = if from <= to { numbered(&ls[from - 1..to], from) } else { String::new() };
                        self.entries.insert(p.clone(), Entry::File(out));
                        (false, format!("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{snippet}"))
                    }
                    _ => {
                        // The first ten occurrences' lines, and whether there are more.
                        let ls: Vec<String> = hits.iter().take(10).map(|&i| (t[..i].matches('\n').count() + 1).to_string()).collect();
                        let more = if hits.len() > 10 { ", and more" } else { "" };
                        (true, format!("No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}{more}. Please ensure it is unique", ls.join(", ")))
                    }
                }
            }
            Cmd::Insert(p, at, text) => {
                let Some(Entry::File(t)) = self.entries.get(p) else {
                    return (true, format!("Error: The path {p} does not exist"));
                };
                let mut ls = lines(t);
                if *at < 0 || *at as usize > ls.len() {
                    return (true, format!("Error: Invalid `insert_line` parameter: {at}. It should be within the range of lines of the file: [0, {}]", ls.len()));
                }
                let n = ls.len();
                let body = text.strip_suffix('\n').unwrap_or(text);
                ls.insert(*at as usize, body);
                let mut out = ls.join("\n");
                // An empty last line put after a file's last line needs the
                // final newline the file did not have (docs/SEMANTICS.md).
                let empty_last = *at as usize == n && (body.is_empty() || body.ends_with('\n'));
                if (t.is_empty() && text.ends_with('\n')) || (!t.is_empty() && (t.ends_with('\n') || empty_last)) {
                    out.push('\n');
                }
                self.entries.insert(p.clone(), Entry::File(out));
                (false, format!("The file {p} has been edited."))
            }
            Cmd::Delete(p) => {
                if p == ROOT {
                    return (true, "Error: Cannot delete the /memories directory itself".into());
                }
                if !self.entries.contains_key(p) {
                    return (true, format!("Error: The path {p} does not exist"));
                }
                self.entries.retain(|k, _| k != p && !k.starts_with(&format!("{p}/")));
                (false, format!("Successfully deleted {p}"))
            }
            Cmd::Rename(from, to) => {
                if from == ROOT {
                    return (true, "Error: Cannot rename the /memories directory itself".into());
                }
                if !self.entries.contains_key(from) {
                    return (true, format!("Error: The path {from} does not exist"));
                }
                if self.entries.contains_key(to) {
                    return (true, format!("Error: The destination {to} already exists"));
                }
                if to.starts_with(&format!("{from}/")) {
                    return (true, format!("Error: Cannot move {from} into itself ({to})"));
                }
                if !self.parents_ok(to) {
                    return (true, format!("Error: Cannot move to {to}: a component of its path is a file, not a directory"));
                }
                self.make_parents(to);
                let moved: Vec<(String, Entry)> = self
                    .entries
                    .iter()
                    .filter(|(k, _)| *k == from || k.starts_with(&format!("{from}/")))
                    .map(|(k, e)| (format!("{to}{}", &k[from.len()..]), e.clone()))
                    .collect();
                self.entries.retain(|k, _| k != from && !k.starts_with(&format!("{from}/")));
                self.entries.extend(moved);
                (false, format!("Successfully renamed {from} to {to}"))
            }
        }
    }
}

#[derive(Debug, Clone)]
pub enum Cmd {
    View(String, Option<(i64, i64)>),
    Create(String, String),
    Replace(String, String, String),
    Insert(String, i64, String),
    Delete(String),
    Rename(String, String),
}

impl Cmd {
    pub fn json(&self) -> Value {
        match self {
            Cmd::View(p, None) => json!({"command": "view", "path": p}),
            Cmd::View(p, Some((s, e))) => {
                json!({"command": "view", "path": p, "view_range": [s, e]})
            }
            Cmd::Create(p, t) => json!({"command": "create", "path": p, "file_text": t}),
            Cmd::Replace(p, o, n) => {
                json!({"command": "str_replace", "path": p, "old_str": o, "new_str": n})
            }
            Cmd::Insert(p, l, t) => {
                json!({"command": "insert", "path": p, "insert_line": l, "insert_text": t})
            }
            Cmd::Delete(p) => json!({"command": "delete", "path": p}),
            Cmd::Rename(a, b) => json!({"command": "rename", "old_path": a, "new_path": b}),
        }
    }
}

/// The tree as the model sees it.
pub fn tree_entries(tree: &Tree) -> BTreeMap<String, Entry> {
    tree.walk()
        .into_iter()
        .map(|(p, node)| {
            let e = match &node.kind {
                NodeKind::Dir(_) => Entry::Dir,
                NodeKind::File(d) => Entry::File(String::from_utf8(d.to_vec()).unwrap()),
                NodeKind::Symlink(_) | NodeKind::Special { .. } => {
                    panic!("the tool makes no symlinks or FIFOs")
                }
            };
            (p.to_string(), e)
        })
        .collect()
}
