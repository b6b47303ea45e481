//! Saves through a temporary file, read as a person reads them. Claude Code
//! saves `X` by writing `X.tmp.<pid>.<hex>` and renaming it over `X`, and
//! many editors save the same way (gedit's `.goutputstream-…`, an atomic
//! save): the history keeps each step (the temporary file's creation, its
//! writes, the rename), and `memfs log` and the review page show them as
//! the one change of `X` they are.
//!
//! A save is a file made new (no content before at its path), written only
//! by the same writer (the same actor and process), and renamed onto
//! another path by that writer within [`WINDOW_SECS`] of its making.

use std::collections::{HashMap, HashSet};

use crate::journal::{Actor, Op, Row};

/// The longest a save through a temporary file takes, from its making to
/// its rename.
pub const WINDOW_SECS: i64 = 10;

/// The saves among `rows` (oldest first): each save's rename (its version)
/// with the versions of the temporary file's steps it stands for.
pub fn saves<'a>(rows: impl IntoIterator<Item = &'a Row>) -> HashMap<u64, Vec<u64>> {
    // Each path made new and written only by its maker so far: who, when
    // it was made, its versions.
    let mut fresh: HashMap<&str, (String, i64, Vec<u64>)> = HashMap::new();
    let mut out = HashMap::new();
    for row in rows {
        if !through_a_mount(&row.actor) {
            // (Any other door's change to a path ends its save.)
            fresh.remove(row.path.as_str());
            if let Some(from) = row.from.as_deref() {
                fresh.remove(from);
            }
            continue;
        }
        let who = writer(row);
        let at = seconds(&row.time).unwrap_or(0);
        match (row.op, row.from.as_deref()) {
            (Op::Create, _) if row.replaces.is_none() => {
                fresh.insert(&row.path, (who, at, vec![row.id()]));
            }
            (Op::Write, _) => match fresh.get_mut(row.path.as_str()) {
                Some((maker, _, versions)) if *maker == who => versions.push(row.id()),
                _ => {
                    fresh.remove(row.path.as_str());
                }
            },
            (Op::Rename | Op::Overwrite, Some(from)) if !row.exchanged => {
                if let Some((maker, made, versions)) = fresh.remove(from) {
                    if maker == who && at - made <= WINDOW_SECS {
                        out.insert(row.id(), versions);
                    }
                }
                fresh.remove(row.path.as_str());
            }
            (_, from) => {
                fresh.remove(row.path.as_str());
                if let Some(from) = from {
                    fresh.remove(from);
                }
            }
        }
    }
    out
}

/// Whether a version came through a mount (a person's program, or an
/// agent's such as Claude Code): the tool's, the API's and memfs' own
/// renames are moves asked for as such, never saves.
fn through_a_mount(actor: &Actor) -> bool {
    let own = matches!(actor.process.as_deref(), Some("memfs" | "memfs-import"));
    actor.door.as_deref() == Some("mount")
        || (actor.kind == "person" && actor.door.is_none() && actor.token.is_none() && !own)
}

/// Who made a row, as a save must have one maker: its actor and process.
fn writer(row: &Row) -> String {
    format!("{}/{:?}", row.actor.short(), row.actor.pid)
}

/// What a save's rename is, read as the one change it is: a write of its
/// path (a creation when nothing was there), an overwrite staying one.
pub fn as_save(row: &Row) -> Row {
    let mut out = row.clone();
    let through = row
        .from
        .as_deref()
        .map(|f| f.rsplit('/').next().unwrap_or(f).to_string())
        .unwrap_or_default();
    out.op = match (row.op, row.replaces) {
        (Op::Overwrite, _) => Op::Overwrite,
        (_, Some(_)) => Op::Write,
        (_, None) => Op::Create,
    };
    out.from = None;
    let note = format!("saved through {through}");
    out.note = Some(match &row.note {
        Some(n) => format!("{note}; {n}"),
        None => note,
    });
    out
}

/// `rows` (newest first, as `memfs log` lists them) with every save
/// through a temporary file shown as the one change it is: the temporary
/// file's steps left out, its rename made a write of the target.
pub fn fold(rows: Vec<Row>) -> Vec<Row> {
    let saves = saves(rows.iter().rev());
    let absorbed: HashSet<u64> = saves.values().flatten().copied().collect();
    rows.into_iter()
        .filter(|r| !absorbed.contains(&r.id()))
        .map(|r| match saves.contains_key(&r.id()) {
            true => as_save(&r),
            false => r,
        })
        .collect()
}

/// Seconds since the epoch of an RFC 3339 UTC time (`2026-12-06T10:43:00…Z`).
fn seconds(time: &str) -> Option<i64> {
    let num = |range: std::ops::Range<usize>| time.get(range)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days from 1970-01-01 to the date (the civil-calendar formula).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::row::VersionId;

    fn row(v: u64, secs: u32, op: Op, path: &str, from: Option<&str>, pid: u32) -> Row {
        let actor = Actor {
            kind: "agent".into(),
            door: Some("mount".into()),
            pid: Some(pid),
            process: Some("claude".into()),
            session: Some("claude".into()),
            ..Actor::default()
        };
        let time = format!("2026-12-06T10:00:{secs:02}Z");
        let mut r = Row::new(v, &time, actor, op, path.into(), 1);
        r.from = from.map(str::to_string);
        r.sha256 = Some(format!("{v:064}"));
        r
    }

    #[test]
    fn times_read_as_seconds() {
        assert_eq!(seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(seconds("2026-12-06T10:43:00.5Z"), Some(1_796_553_780));
        assert_eq!(seconds("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(seconds("nonsense"), None);
    }

    #[test]
    fn a_save_through_a_temporary_file_is_one_change_of_its_target() {
        let tmp = "/memories/MEMORY.md.tmp.9.ab";
        let mut over = row(4, 2, Op::Rename, "/memories/MEMORY.md", Some(tmp), 9);
        over.replaces = Some(VersionId(1));
        let rows = vec![
            row(1, 0, Op::Create, "/memories/MEMORY.md", None, 9),
            row(2, 1, Op::Create, tmp, None, 9),
            row(3, 1, Op::Write, tmp, None, 9),
            over,
            // A rename of a file that was there before is a rename.
            row(
                5,
                3,
                Op::Rename,
                "/memories/b.md",
                Some("/memories/MEMORY.md"),
                9,
            ),
        ];
        let shown = fold(rows.into_iter().rev().collect());
        let ops: Vec<(u64, Op, &str)> = shown
            .iter()
            .map(|r| (r.id(), r.op, r.path.as_str()))
            .collect();
        assert_eq!(
            ops,
            vec![
                (5, Op::Rename, "/memories/b.md"),
                (4, Op::Write, "/memories/MEMORY.md"),
                (1, Op::Create, "/memories/MEMORY.md"),
            ]
        );
        assert_eq!(
            shown[1].note.as_deref(),
            Some("saved through MEMORY.md.tmp.9.ab")
        );
        assert!(shown[1].from.is_none());
    }

    #[test]
    fn another_writer_or_a_slow_rename_is_no_save() {
        let tmp = "/memories/x.tmp";
        // Another process wrote the temporary file in between.
        let rows = [
            row(1, 0, Op::Create, tmp, None, 9),
            row(2, 1, Op::Write, tmp, None, 10),
            row(3, 2, Op::Rename, "/memories/x", Some(tmp), 9),
        ];
        assert!(saves(rows.iter()).is_empty());
        // Renamed long after it was made: a file of its own first.
        let rows = [
            row(1, 0, Op::Create, tmp, None, 9),
            row(2, 30, Op::Rename, "/memories/x", Some(tmp), 9),
        ];
        assert!(saves(rows.iter()).is_empty());
        // A new file renamed at once: one creation of the target.
        let rows = [
            row(1, 0, Op::Create, tmp, None, 9),
            row(2, 0, Op::Rename, "/memories/x", Some(tmp), 9),
        ];
        let folded = fold(rows.into_iter().rev().collect());
        assert_eq!(folded.len(), 1);
        assert_eq!(
            (folded[0].op, folded[0].path.as_str()),
            (Op::Create, "/memories/x")
        );
    }
}
