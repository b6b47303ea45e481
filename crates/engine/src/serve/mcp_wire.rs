//! MCP's shapes for the methods memfs serves (`initialize`, `ping`,
//! `tools/list`, `tools/call`), shared by the stdio and HTTP doors. Params
//! are read leniently, as the doors always read them: a field of the wrong
//! type reads as absent, and then the method's own refusal or default
//! applies. Results are written as the MCP specification names them.

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::jsonrpc::Outgoing;
use crate::tool::{Content, ToolResult};

/// What both doors answer with.
pub type Reply = Outgoing<McpResult>;

/// A method's params, taken: an object through serde, anything else (a
/// string, an array, `null`) as no fields at all. (A derived struct would
/// take an array as its fields in order.) Moves the strings: `tools/call`'s
/// arguments can hold a whole file.
pub fn take<T: DeserializeOwned + Default>(params: Value) -> T {
    match params {
        Value::Object(_) => serde_json::from_value(params).unwrap_or_default(),
        _ => T::default(),
    }
}

/// A field kept when it has the type asked for; anything else (an array
/// included) reads as absent.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(_) => None,
        v => serde_json::from_value(v).ok(),
    })
}

/// `initialize`'s params: what memfs reads of them.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InitializeParams {
    #[serde(deserialize_with = "lenient")]
    pub protocol_version: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub client_info: Option<ClientInfo>,
}

/// `clientInfo`: its `name` names the session.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClientInfo {
    #[serde(deserialize_with = "lenient")]
    pub name: Option<String>,
}

impl InitializeParams {
    pub fn client_name(&self) -> Option<&str> {
        self.client_info.as_ref()?.name.as_deref()
    }
}

/// `tools/call`'s params.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CallToolParams {
    #[serde(deserialize_with = "lenient")]
    pub name: Option<String>,
    /// The tool's input when it is an object (the tool reads it itself:
    /// `tool::input`); absent or of another type, `None`.
    #[serde(deserialize_with = "lenient")]
    pub arguments: Option<Map<String, Value>>,
}

/// `initialize`'s result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: &'static str,
    pub capabilities: ServerCapabilities,
    pub server_info: Implementation,
    pub instructions: &'static str,
}

#[derive(Debug, Serialize)]
pub struct ServerCapabilities {
    pub tools: ToolsCapability,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCapability {
    pub list_changed: bool,
}

#[derive(Debug, Serialize)]
pub struct Implementation {
    pub name: &'static str,
    pub title: &'static str,
    pub version: &'static str,
}

/// `ping`'s result, `{}`. (Braces: a unit struct would be `null`.)
#[derive(Debug, Default, Serialize)]
pub struct Empty {}

/// `tools/list`'s result.
#[derive(Debug, Serialize)]
pub struct ToolsListResult {
    pub tools: Vec<ToolDef>,
}

/// A tool as `tools/list` shows it. Its input schema is a JSON Schema
/// document, data rather than protocol: it stays a `Value`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input_schema: Value,
    pub annotations: ToolAnnotations,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    pub title: &'static str,
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    pub idempotent_hint: bool,
    pub open_world_hint: bool,
}

/// `tools/call`'s result: one content block, and whether the tool failed
/// (a tool's error is a result, not a JSON-RPC error).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    pub content: Vec<ContentBlock>,
    pub is_error: bool,
}

/// A content block.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: &'static str,
    },
}

impl CallToolResult {
    /// One text block.
    pub fn text(text: String, is_error: bool) -> Self {
        CallToolResult {
            content: vec![ContentBlock::Text { text }],
            is_error,
        }
    }
}

/// A tool's result as MCP content (moved, not copied: a view holds a file).
impl From<ToolResult> for CallToolResult {
    fn from(result: ToolResult) -> Self {
        let block = match result.content {
            Content::Text(text) => ContentBlock::Text { text },
            Content::Image { media_type, base64 } => ContentBlock::Image {
                data: base64,
                mime_type: media_type,
            },
        };
        CallToolResult {
            content: vec![block],
            is_error: result.is_error,
        }
    }
}

/// Every result memfs answers with.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum McpResult {
    Initialize(InitializeResult),
    Empty(Empty),
    ToolsList(ToolsListResult),
    CallTool(CallToolResult),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A field of the wrong type, or params that are not an object, read
    /// as absent: the method's own refusal or default follows.
    #[test]
    fn params_are_read_leniently() {
        let p: InitializeParams = take(json!({"protocolVersion": 5, "clientInfo": {"name": "c"}}));
        assert_eq!(
            (p.protocol_version, p.client_info.unwrap().name),
            (None, Some("c".into()))
        );
        let p: InitializeParams = take(json!(["2025-06-18", {"name": "c"}]));
        assert!(p.protocol_version.is_none() && p.client_info.is_none());
        let p: CallToolParams = take(json!({"name": "memory", "arguments": []}));
        assert_eq!((p.name.as_deref(), p.arguments), (Some("memory"), None));
        let p: CallToolParams = take(json!({"name": ["memory"], "arguments": {"command": "view"}}));
        assert_eq!(p.name, None);
        assert_eq!(p.arguments.unwrap()["command"], "view");
    }

    #[test]
    fn blocks_and_empty_results_are_as_mcp_names_them() {
        let image = CallToolResult::from(ToolResult {
            content: Content::Image {
                media_type: "image/png",
                base64: "AA==".into(),
            },
            is_error: false,
        });
        assert_eq!(
            serde_json::to_value(image).unwrap(),
            json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}], "isError": false})
        );
        assert_eq!(serde_json::to_value(Empty {}).unwrap(), json!({}));
    }
}
