//! `view`: a directory listing, a file's numbered lines, or an image.

use super::format::{numbered, split_lines, write_human_size, MAX_LINES};
use super::image;
use super::input::clip;
use super::result::{Content, ToolResult};
use crate::path::MemPath;
use crate::store::{Listing, Snapshot};

/// How deep a directory view lists.
pub const LIST_DEPTH: usize = 2;

pub fn directory(path: &MemPath, listing: &Listing) -> ToolResult {
    use std::fmt::Write;
    let path = path.to_string();
    let rows: usize = listing
        .entries
        .iter()
        .map(|e| e.relative.len() + path.len() + 10)
        .sum();
    let mut out = String::with_capacity(160 + rows);
    let _ = writeln!(
        out,
        "Here're the files and directories up to 2 levels deep in {path}, excluding hidden items and node_modules:"
    );
    write_human_size(&mut out, listing.size);
    let _ = write!(out, "\t{path}");
    for entry in &listing.entries {
        out.push('\n');
        write_human_size(&mut out, entry.size);
        let _ = write!(out, "\t{path}/{}", entry.relative);
        if entry.is_dir {
            out.push('/');
        }
    }
    ToolResult::ok(out)
}

pub fn file(path: &MemPath, bytes: &[u8], range: Option<(i64, i64)>) -> ToolResult {
    let name = path.file_name().unwrap_or_default();
    let media_type = image::sniff(bytes);
    if image::has_image_extension(name) || (media_type.is_some() && range.is_none()) {
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

fn image_view(path: &MemPath, bytes: &[u8], media_type: Option<&'static str>) -> ToolResult {
    let Some(media_type) = media_type else {
        return ToolResult::error(format!(
            "Error: {path} is named as an image but its bytes are not a PNG, JPEG, GIF or WebP image"
        ));
    };
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
