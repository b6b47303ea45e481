//! JSON-RPC 2.0 as memfs' MCP doors speak it: one message in (no batches),
//! at most one answer out. Both doors (`serve::mcp` on stdio and the socket,
//! `http::mcp` over streamable HTTP) read a message here, so its checks,
//! their order and their error texts are written once; what goes back is an
//! [`Outgoing`] of the methods' result type.

use serde::{Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// The error codes memfs sends (JSON-RPC 2.0, section 5.1). (-32603, the
/// internal error, is never sent: a failing tool is a result with
/// `isError`.)
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// A request's id: a string or a number, echoed as it came (a number keeps
/// its form: `7`, `7.0`, `18446744073709551615`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Id {
    Number(Number),
    String(String),
}

/// `"jsonrpc": "2.0"`, the one version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct V2;

impl Serialize for V2 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("2.0")
    }
}

/// A JSON-RPC error object (memfs sends no `data`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
}

/// One answer: a result or an error. `R` is the methods' result type.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Outgoing<R> {
    Result {
        jsonrpc: V2,
        id: Id,
        result: R,
    },
    /// `id` is `null` when the request's could not be read, never left out
    /// (section 5).
    Error {
        jsonrpc: V2,
        id: Option<Id>,
        error: ErrorObject,
    },
}

impl<R> Outgoing<R> {
    pub fn result(id: Id, result: R) -> Self {
        Outgoing::Result {
            jsonrpc: V2,
            id,
            result,
        }
    }

    pub fn error(id: Option<Id>, code: i64, message: impl Into<String>) -> Self {
        Outgoing::Error {
            jsonrpc: V2,
            id,
            error: ErrorObject {
                code,
                message: message.into(),
            },
        }
    }
}

/// One message read, sorted in the order the doors check it.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A method and an id: answered.
    Request {
        id: Id,
        method: String,
        params: Value,
    },
    /// A method and no id: never answered (`notifications/initialized`,
    /// `notifications/cancelled`, any other).
    Notification { method: String, params: Value },
    /// `result` or `error` and no method: a response, though this server
    /// sends no requests; not answered.
    Response,
    /// Refused before its method is looked at: answered with this error.
    Invalid { id: Option<Id>, error: ErrorObject },
}

impl Incoming {
    /// Reads one message: parsed (strictly, as every door parses: a key
    /// twice is an error, the values are bounded), an object, its id, a
    /// method or a response, the version. An absent `params` reads as `{}`;
    /// a present one is kept as sent (each method reads its own:
    /// `serve::mcp_wire`).
    pub fn parse(bytes: &[u8]) -> Incoming {
        let message = match crate::json::parse(bytes) {
            Ok(v) => v,
            Err(e) => return Incoming::invalid(None, PARSE_ERROR, format!("Parse error: {e}")),
        };
        let Value::Object(mut obj) = message else {
            let what = match message.is_array() {
                true => "batches are not supported",
                false => "a message must be a JSON object",
            };
            return Incoming::invalid(None, INVALID_REQUEST, format!("Invalid Request: {what}"));
        };
        let id = match obj.remove("id") {
            None => None,
            Some(Value::String(s)) => Some(Id::String(s)),
            Some(Value::Number(n)) => Some(Id::Number(n)),
            Some(bad) => {
                return Incoming::invalid(
                    None,
                    INVALID_REQUEST,
                    format!("Invalid Request: an id must be a string or a number, not {bad}"),
                )
            }
        };
        let Some(Value::String(method)) = obj.remove("method") else {
            if obj.contains_key("result") || obj.contains_key("error") {
                return Incoming::Response;
            }
            return Incoming::invalid(id, INVALID_REQUEST, "Invalid Request: no method");
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            let why = "Invalid Request: jsonrpc must be \"2.0\"";
            return Incoming::invalid(id, INVALID_REQUEST, why);
        }
        let params = obj
            .remove("params")
            .unwrap_or_else(|| Value::Object(Map::new()));
        match id {
            Some(id) => Incoming::Request { id, method, params },
            None => Incoming::Notification { method, params },
        }
    }

    fn invalid(id: Option<Id>, code: i64, message: impl Into<String>) -> Incoming {
        Incoming::Invalid {
            id,
            error: ErrorObject {
                code,
                message: message.into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error_of(text: &str) -> (Option<Id>, i64, String) {
        match Incoming::parse(text.as_bytes()) {
            Incoming::Invalid { id, error } => (id, error.code, error.message),
            other => panic!("{text} read as {other:?}"),
        }
    }

    /// Each refusal in the order the doors check, with its code and id.
    #[test]
    fn a_message_is_checked_in_protocol_order() {
        assert_eq!(error_of("{").1, PARSE_ERROR);
        assert_eq!(error_of(r#"{"id":1,"id":2}"#).1, PARSE_ERROR);
        assert!(error_of("[1]").2.ends_with("batches are not supported"));
        assert!(error_of("\"x\"")
            .2
            .ends_with("a message must be a JSON object"));
        let (id, code, text) = error_of(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
        assert_eq!((id, code), (None, INVALID_REQUEST));
        assert!(text.ends_with("not null"), "{text}");
        let (id, _, text) = error_of(r#"{"jsonrpc":"2.0","id":3}"#);
        assert_eq!(id, Some(Id::Number(3.into())));
        assert_eq!(text, "Invalid Request: no method");
        let (id, _, text) = error_of(r#"{"id":"a","method":"ping"}"#);
        assert_eq!(id, Some(Id::String("a".into())));
        assert_eq!(text, "Invalid Request: jsonrpc must be \"2.0\"");
        assert_eq!(
            Incoming::parse(br#"{"id":1,"result":{}}"#),
            Incoming::Response
        );
        assert_eq!(
            Incoming::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Incoming::Notification {
                method: "notifications/initialized".into(),
                params: json!({})
            }
        );
    }

    /// An id goes back as it came, and an unread one as `null`.
    #[test]
    fn answers_echo_the_id_and_carry_the_version() {
        let Incoming::Request { id, .. } =
            Incoming::parse(br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#)
        else {
            panic!("not a request")
        };
        let ok = serde_json::to_string(&Outgoing::result(id, json!({}))).unwrap();
        assert_eq!(
            ok,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":{}}"#
        );
        let refused = Outgoing::<Value>::error(None, PARSE_ERROR, "Parse error: x");
        assert_eq!(
            serde_json::to_value(refused).unwrap(),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error: x"}})
        );
    }
}
