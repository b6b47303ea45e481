//! What a request asks, checked: its body and query, paths, preconditions.

use serde::Deserialize;

use super::*;

/// A request's body as the type `T` it must fit: a JSON object (an empty
/// body is `{}`); a field that does not fit is named in the refusal.
pub(super) fn body<T: serde::de::DeserializeOwned>(call: &Call) -> ApiResult<T> {
    let value = match call.body.iter().all(u8::is_ascii_whitespace) {
        true => Value::Object(Map::new()),
        false => match crate::json::parse(call.body) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return Err(ApiError::invalid("the request body must be a JSON object")),
            Err(e) => {
                return Err(ApiError::invalid(format!(
                    "the request body is not valid JSON: {e}"
                )))
            }
        },
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        match field.as_str() {
            "." => ApiError::invalid(format!("the request body: {}", e.inner())),
            _ => ApiError::invalid(format!("`{field}`: {}", e.inner())),
        }
    })
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

/// An update's `precondition`: the content's SHA-256 it expects.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Precondition {
    ContentSha256 { content_sha256: String },
}

impl Precondition {
    fn checked(self) -> ApiResult<String> {
        let Precondition::ContentSha256 { content_sha256 } = self;
        match is_sha(&content_sha256) {
            true => Ok(content_sha256),
            false => Err(ApiError::invalid(
                "`precondition.content_sha256` is 64 lowercase hex digits",
            )),
        }
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

// ---- requests, typed -------------------------------------------------------

/// `POST /v1/memory_stores`: a new store.
#[derive(Deserialize)]
pub(super) struct CreateStore {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// String values only.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

impl CreateStore {
    pub(super) fn parse(call: &Call) -> ApiResult<CreateStore> {
        let asked: CreateStore = body(call)?;
        check_name(&asked.name)?;
        check_description(asked.description.as_deref().unwrap_or(""))?;
        check_metadata(asked.metadata.as_ref().unwrap_or(&BTreeMap::new()))?;
        Ok(asked)
    }
}

/// `POST /v1/memory_stores/{id}`: what changes in a store's record (a
/// metadata key set to null is removed).
#[derive(Deserialize)]
pub(super) struct UpdateStore {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, Option<String>>>,
}

impl UpdateStore {
    pub(super) fn parse(call: &Call) -> ApiResult<UpdateStore> {
        let asked: UpdateStore = body(call)?;
        if let Some(n) = &asked.name {
            check_name(n)?;
        }
        if let Some(d) = &asked.description {
            check_description(d)?;
        }
        Ok(asked)
    }
}

/// `POST /v1/memory_stores/{id}/memories`: a new memory at a path.
#[derive(Deserialize)]
struct CreateMemoryBody {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

/// A new memory, its path checked.
pub(super) struct CreateMemory {
    pub path: String,
    pub mem: MemPath,
    pub content: String,
}

impl CreateMemory {
    pub(super) fn parse(call: &Call) -> ApiResult<CreateMemory> {
        let asked: CreateMemoryBody = body(call)?;
        let path = asked
            .path
            .ok_or_else(|| ApiError::invalid("`path` is required"))?;
        let content = asked
            .content
            .ok_or_else(|| ApiError::invalid("`content` is required (\"\" for an empty memory)"))?;
        let mem = memory_path(&path)?;
        Ok(CreateMemory { path, mem, content })
    }
}

/// `POST /v1/memory_stores/{id}/memories/{mid}`: a new content, a new path,
/// or both, under a precondition on the content now.
#[derive(Deserialize)]
struct UpdateMemoryBody {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    precondition: Option<Precondition>,
}

/// A memory's update, its precondition checked.
pub(super) struct UpdateMemory {
    pub content: Option<String>,
    pub path: Option<String>,
    pub precondition: Option<String>,
}

impl UpdateMemory {
    pub(super) fn parse(call: &Call) -> ApiResult<UpdateMemory> {
        let asked: UpdateMemoryBody = body(call)?;
        Ok(UpdateMemory {
            content: asked.content,
            path: asked.path,
            precondition: asked.precondition.map(Precondition::checked).transpose()?,
        })
    }
}
