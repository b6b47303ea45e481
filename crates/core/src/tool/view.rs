//! `view`: a directory listing, a file's numbered lines, or an image.

use super::format::{numbered, split_lines, write_human_size, MAX_LINES, VIEW_CHAR_CAP};
use super::image;
use super::result::{Content, ToolResult};
use crate::path::MemPath;
use crate::store::{Listing, Snapshot, Window};
use crate::text::clip;

/// How deep a directory view lists.
pub const LIST_DEPTH: usize = 2;

/// Most entries a directory view copies out of the store: more than fit in
/// [`VIEW_CHAR_CAP`] characters (a row is at least 8 characters long).
const MAX_ROWS: usize = VIEW_CHAR_CAP / 8;

/// The entries a directory view asks for: `view_range` picks rows of the
/// listing as it picks lines of a file.
pub fn window(range: Option<(i64, i64)>) -> Window {
    let Some((start, end)) = range else {
        return Window {
            skip: 0,
            take: MAX_ROWS,
        };
    };
    let skip = usize::try_from(start.saturating_sub(1)).unwrap_or(0);
    let take = match end {
        -1 => MAX_ROWS,
        end => usize::try_from(end.saturating_sub(start).saturating_add(1)).unwrap_or(0),
    };
    Window {
        skip,
        take: take.min(MAX_ROWS),
    }
}

/// A directory's listing, capped at [`VIEW_CHAR_CAP`] characters at whole
/// rows, with a last line that says how to see the rest.
pub fn directory(path: &MemPath, listing: &Listing, range: Option<(i64, i64)>) -> ToolResult {
    use std::fmt::Write;
    let path = path.to_string();
    if let Some((start, end)) = range {
        if check_range(start, end, listing.total).is_none() {
            return ToolResult::error(format!(
                "Error: Invalid `view_range` parameter: [{start}, {end}]. The directory {path} lists {n} entries; \
                 for a directory, `view_range` takes [first_entry, last_entry] with 1 <= first_entry <= last_entry <= {n}, \
                 or last_entry = -1 for the end of the listing.",
                n = listing.total
            ));
        }
    }
    let mut out = String::with_capacity(VIEW_CHAR_CAP + 256);
    let _ = writeln!(
        out,
        "Here're the files and directories up to 2 levels deep in {path}, excluding hidden items and node_modules:"
    );
    write_human_size(&mut out, listing.size);
    let _ = write!(out, "\t{path}");
    let mut used = out.chars().count();
    let mut row = String::new();
    for (i, entry) in listing.entries.iter().enumerate() {
        row.clear();
        row.push('\n');
        write_human_size(&mut row, entry.size);
        let _ = write!(row, "\t{path}/{}", entry.relative);
        if entry.is_dir {
            row.push('/');
        }
        let cost = if row.is_ascii() {
            row.len()
        } else {
            row.chars().count()
        };
        if used + cost > VIEW_CHAR_CAP {
            return ToolResult::ok(with_rest_note(out, listing, i));
        }
        out.push_str(&row);
        used += cost;
    }
    let shown_end = listing.skipped + listing.entries.len();
    if range.is_none() && shown_end < listing.total {
        return ToolResult::ok(with_rest_note(out, listing, listing.entries.len()));
    }
    ToolResult::ok(out)
}

/// Ends a capped listing whose first `shown` rows of the window fit.
fn with_rest_note(mut out: String, listing: &Listing, shown: usize) -> String {
    use std::fmt::Write;
    let first = listing.skipped + 1;
    let last = listing.skipped + shown;
    let _ = write!(
        out,
        "\n[showing entries {first}-{last} of {total}: a view is capped at {VIEW_CHAR_CAP} characters. \
         Use view_range [{next}, -1] to see the rest, or view a subdirectory.]",
        total = listing.total,
        next = last + 1
    );
    out
}

pub fn file(path: &MemPath, bytes: &[u8], range: Option<(i64, i64)>) -> ToolResult {
    // What the bytes are decides, not the name: a text file named
    // `pic.jpg` is shown as text, an image named anything as an image.
    if let Some(media_type) = image::sniff(bytes) {
        return image_view(path, bytes, media_type);
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return ToolResult::error(format!(
            "Error: {path} is not a UTF-8 text file or a PNG, JPEG, GIF or WebP image, so it cannot be viewed"
        ));
    };
    let lines = split_lines(text);
    if lines.len() > MAX_LINES {
        return ToolResult::error(format!(
            "File {path} exceeds maximum line limit of 999,999 lines."
        ));
    }
    let (start, end) = match range {
        None => (1, lines.len()),
        Some((start, end)) => match check_range(start, end, lines.len()) {
            Some(bounds) => bounds,
            None => {
                return ToolResult::error(format!(
                    "Error: Invalid `view_range` parameter: [{start}, {end}]. The file {path} has {n} lines; \
                     `view_range` takes [start_line, end_line] with 1 <= start_line <= end_line <= {n}, \
                     or end_line = -1 for the end of the file.",
                    n = lines.len()
                ))
            }
        },
    };
    let shown = lines.get(start.saturating_sub(1)..end).unwrap_or_default();
    let body = numbered(shown, start, lines.len());
    ToolResult::ok(format!(
        "Here's the content of {path} with line numbers:\n{body}"
    ))
}

/// 1-based inclusive bounds for a valid range of a file of `n` lines.
fn check_range(start: i64, end: i64, n: usize) -> Option<(usize, usize)> {
    let n = n as i64;
    let end = if end == -1 { n } else { end };
    (1 <= start && start <= end && end <= n).then_some((start as usize, end as usize))
}

fn image_view(path: &MemPath, bytes: &[u8], media_type: &'static str) -> ToolResult {
    if bytes.len() > image::MAX_IMAGE_BYTES {
        return ToolResult::error(format!(
            "Error: the image {path} is {} bytes, over the {} byte limit for viewing an image",
            bytes.len(),
            image::MAX_IMAGE_BYTES
        ));
    }
    ToolResult {
        content: Content::Image {
            media_type,
            base64: image::encode(bytes),
        },
        is_error: false,
    }
}

/// The result for a path whose snapshot is not a file or directory.
pub fn other(path: &MemPath, snapshot: &Snapshot) -> ToolResult {
    debug_assert!(matches!(snapshot, Snapshot::Other));
    ToolResult::error(format!(
        "Error: {} is a symbolic link, which memfs does not follow",
        clip(&path.to_string())
    ))
}

/// Said after a view while a shared store cannot be reached: what the
/// view shows is this host's copy, maybe behind other hosts. `kept`: a
/// store over HTTP, whose changes made meanwhile are kept here and sent
/// later; else a database, whose changes fail until it answers.
pub fn stale_note(since: std::time::SystemTime, kept: bool) -> String {
    let since = humantime::format_rfc3339_seconds(since);
    match kept {
        true => format!(
            "\n\n(memfs: this memory is a copy of a memory store that cannot be reached since {since}; it may be stale, and changes are kept here and sent when the store answers again)"
        ),
        false => format!(
            "\n\n(memfs: this memory is shared through a database that cannot be reached since {since}; this is this host's copy, which may be stale, and changes fail until the database answers again)"
        ),
    }
}
