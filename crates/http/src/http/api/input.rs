//! What a request asks, checked: its body and query, paths, preconditions.

use super::*;

pub(super) fn body(call: &Call) -> ApiResult<Map<String, Value>> {
    if call.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match crate::json::parse(call.body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::invalid("the request body must be a JSON object")),
        Err(e) => Err(ApiError::invalid(format!(
            "the request body is not valid JSON: {e}"
        ))),
    }
}

/// A string field: absent and null are `None`.
pub(super) fn opt_str<'a>(map: &'a Map<String, Value>, key: &str) -> ApiResult<Option<&'a str>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(format!("`{key}` must be a string"))),
    }
}

pub(super) fn view(call: &Call, default_full: bool) -> ApiResult<bool> {
    match call.query.get("view").map(String::as_str) {
        None => Ok(default_full),
        Some("full") => Ok(true),
        Some("basic") => Ok(false),
        Some(other) => Err(ApiError::invalid(format!(
            "`view` is `basic` or `full`, not `{}`",
            crate::text::label(other)
        ))),
    }
}

pub(super) fn limit(call: &Call, full: bool) -> ApiResult<usize> {
    let n = match call.query.get("limit") {
        None => 20,
        Some(text) => match text.parse::<usize>() {
            Ok(n @ 1..=100) => n,
            _ => return Err(ApiError::invalid("`limit` is a whole number from 1 to 100")),
        },
    };
    Ok(if full { n.min(20) } else { n })
}

pub(super) fn bool_query(call: &Call, key: &str) -> ApiResult<bool> {
    match call.query.get(key).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(ApiError::invalid(format!("`{key}` is `true` or `false`"))),
    }
}

pub(super) fn is_sha(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A time bound (`created_at[gte]`), as the seconds it names.
pub(super) fn time_query(call: &Call, key: &str) -> ApiResult<Option<std::time::SystemTime>> {
    let Some(text) = call.query.get(key) else {
        return Ok(None);
    };
    metas::parse_time(text)
        .map(Some)
        .ok_or_else(|| ApiError::invalid(format!("`{key}` must be an RFC 3339 time in UTC")))
}

/// A path as the API takes it (`/notes/a.md`): 1 to 20 segments, none empty,
/// `.` or `..`; no control or format characters, no line or paragraph
/// separator; NFC; at most 1,024 bytes. Also a path memfs can hold.
pub(super) fn memory_path(text: &str) -> ApiResult<MemPath> {
    let bad = |why: &str| {
        Err(ApiError::invalid(format!(
            "`{}` is not a memory path: {why}",
            crate::text::label(text)
        )))
    };
    if !text.starts_with('/') {
        return bad("it must start with /");
    }
    if text.len() > 1024 {
        return bad("it is longer than 1,024 bytes");
    }
    let segments: Vec<&str> = text[1..].split('/').collect();
    if segments.len() > 20 {
        return bad("it has more than 20 segments");
    }
    if segments
        .iter()
        .any(|s| s.is_empty() || *s == "." || *s == "..")
    {
        return bad("a segment is empty, `.` or `..`");
    }
    if text
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') || is_format_char(c))
    {
        return bad("it holds a control or format character");
    }
    if !unicode_normalization::is_nfc(text) {
        return bad("it is not in Unicode Normalization Form C");
    }
    MemPath::parse(&format!("/memories{text}")).or_else(|e| bad(&e.to_string()))
}

/// Unicode's format characters (category Cf) that can hide in a path.
pub(super) fn is_format_char(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}'
        | '\u{08E2}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}' | '\u{13430}'..='\u{1343F}'
        | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0001}'
        | '\u{E0020}'..='\u{E007F}')
}

/// An update's `precondition`: the content's SHA-256 it expects, if any.
pub(super) fn precondition(given: Option<&Value>) -> ApiResult<Option<String>> {
    match given {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(p)) => {
            if p.get("type").and_then(Value::as_str) != Some("content_sha256") {
                return Err(ApiError::invalid(
                    "`precondition.type` must be `content_sha256`",
                ));
            }
            match p.get("content_sha256").and_then(Value::as_str) {
                Some(s) if is_sha(s) => Ok(Some(s.to_string())),
                _ => Err(ApiError::invalid(
                    "`precondition.content_sha256` is 64 lowercase hex digits",
                )),
            }
        }
        Some(_) => Err(ApiError::invalid("`precondition` must be an object")),
    }
}

pub(super) fn check_name(name: &str) -> ApiResult<()> {
    let n = name.chars().count();
    if n == 0 || n > 255 || name.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "`name` is 1 to 255 characters, without control characters",
        ));
    }
    Ok(())
}

pub(super) fn check_description(text: &str) -> ApiResult<()> {
    match text.chars().count() > 1024 {
        true => Err(ApiError::invalid(
            "`description` is at most 1,024 characters",
        )),
        false => Ok(()),
    }
}

pub(super) fn check_metadata(map: &BTreeMap<String, String>) -> ApiResult<()> {
    if map.len() > 16 {
        return Err(ApiError::invalid("`metadata` holds at most 16 pairs"));
    }
    for (k, v) in map {
        let kn = k.chars().count();
        if kn == 0 || kn > 64 || v.chars().count() > 512 {
            return Err(ApiError::invalid(
                "`metadata` keys are 1 to 64 characters and values at most 512",
            ));
        }
    }
    Ok(())
}

/// `metadata` of a create: string values only.
pub(super) fn metadata_of(value: Option<&Value>) -> ApiResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let Value::String(v) = v else {
                    return Err(ApiError::invalid("`metadata` values must be strings"));
                };
                out.insert(k.clone(), v.clone());
            }
        }
        Some(_) => return Err(ApiError::invalid("`metadata` must be an object")),
    }
    check_metadata(&out)?;
    Ok(out)
}

// ---- requests, typed -------------------------------------------------------

/// `POST /v1/memory_stores`: a new store.
pub(super) struct CreateStore {
    pub name: String,
    pub description: String,
    pub metadata: BTreeMap<String, String>,
}

impl CreateStore {
    pub(super) fn parse(call: &Call) -> ApiResult<CreateStore> {
        let map = body(call)?;
        let name = opt_str(&map, "name")?
            .ok_or_else(|| ApiError::invalid("`name` is required"))?
            .to_string();
        check_name(&name)?;
        let description = opt_str(&map, "description")?.unwrap_or("").to_string();
        check_description(&description)?;
        let metadata = metadata_of(map.get("metadata"))?;
        Ok(CreateStore {
            name,
            description,
            metadata,
        })
    }
}

/// `POST /v1/memory_stores/{id}`: what changes in a store's record (a
/// metadata key set to null is removed).
pub(super) struct UpdateStore {
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Vec<(String, Option<String>)>,
}

impl UpdateStore {
    pub(super) fn parse(call: &Call) -> ApiResult<UpdateStore> {
        let map = body(call)?;
        let name = opt_str(&map, "name")?.map(str::to_string);
        if let Some(n) = &name {
            check_name(n)?;
        }
        let description = opt_str(&map, "description")?.map(str::to_string);
        if let Some(d) = &description {
            check_description(d)?;
        }
        let metadata = match map.get("metadata") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), Some(s.clone()))),
                    Value::Null => Ok((k.clone(), None)),
                    _ => Err(ApiError::invalid("`metadata` values are strings or null")),
                })
                .collect::<ApiResult<_>>()?,
            Some(_) => return Err(ApiError::invalid("`metadata` must be an object")),
        };
        Ok(UpdateStore {
            name,
            description,
            metadata,
        })
    }
}

/// `POST /v1/memory_stores/{id}/memories`: a new memory at a path.
pub(super) struct CreateMemory {
    pub path: String,
    pub mem: MemPath,
    pub content: String,
}

impl CreateMemory {
    pub(super) fn parse(call: &Call) -> ApiResult<CreateMemory> {
        let map = body(call)?;
        let path = opt_str(&map, "path")?.ok_or_else(|| ApiError::invalid("`path` is required"))?;
        if !map.contains_key("content") {
            return Err(ApiError::invalid(
                "`content` is required (\"\" for an empty memory)",
            ));
        }
        let content = opt_str(&map, "content")?.unwrap_or("").to_string();
        let mem = memory_path(path)?;
        Ok(CreateMemory {
            path: path.to_string(),
            mem,
            content,
        })
    }
}

/// `POST /v1/memory_stores/{id}/memories/{mid}`: a new content, a new path,
/// or both, under a precondition on the content now.
pub(super) struct UpdateMemory {
    pub content: Option<String>,
    pub path: Option<String>,
    pub precondition: Option<String>,
}

impl UpdateMemory {
    pub(super) fn parse(call: &Call) -> ApiResult<UpdateMemory> {
        let map = body(call)?;
        Ok(UpdateMemory {
            content: opt_str(&map, "content")?.map(str::to_string),
            path: opt_str(&map, "path")?.map(str::to_string),
            precondition: precondition(map.get("precondition"))?,
        })
    }
}
