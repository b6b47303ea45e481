//! The answer to a history request, as the CLI prints it and as an owner
//! sends it back on one control line. A leaf of `control/`: the requests
//! and the expiry both answer with it.

use serde::{Deserialize, Serialize};

/// The control line's type.
pub const TYPE: &str = "memfs_history";

/// What the CLI prints: `out` to stdout, `err` to stderr, and its exit code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub code: u8,
    #[serde(with = "b64")]
    pub out: Vec<u8>,
    pub err: String,
    /// A paged `log`: where the next page begins (none: the last page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<crate::journal::LogPage>,
}

mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

impl Reply {
    pub(super) fn ok(out: impl Into<Vec<u8>>) -> Reply {
        Reply {
            code: 0,
            out: out.into(),
            err: String::new(),
            next: None,
        }
    }

    pub fn error(err: impl Into<String>) -> Reply {
        Reply {
            code: 1,
            out: Vec::new(),
            err: err.into(),
            next: None,
        }
    }

    /// The reply as one control answer line.
    pub fn to_line(&self) -> String {
        let mut v = serde_json::to_value(self).expect("a reply serializes");
        v["type"] = TYPE.into();
        v.to_string()
    }

    pub fn from_line(line: &str) -> Reply {
        match serde_json::from_str::<Reply>(line) {
            Ok(reply) => reply,
            Err(_) => {
                // An owner too old to know history, or an error line.
                let text = serde_json::from_str::<serde_json::Value>(line)
                    .ok()
                    .and_then(|v| v["content"].as_str().map(str::to_string))
                    .unwrap_or_else(|| line.to_string());
                Reply::error(format!(
                    "the memfs that owns the data dir answered: {}",
                    crate::text::clip(&text)
                ))
            }
        }
    }
}
