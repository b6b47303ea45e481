//! A tool result: text or an image block, and whether it is an error.

use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Text(String),
    /// A base64 image, as the Messages API's image content block carries it.
    Image {
        media_type: &'static str,
        base64: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub content: Content,
    pub is_error: bool,
}

impl ToolResult {
    pub fn ok(text: impl Into<String>) -> Self {
        ToolResult {
            content: Content::Text(text.into()),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolResult {
            content: Content::Text(text.into()),
            is_error: true,
        }
    }

    /// Bytes of content (text, or an image's base64): what holding it costs.
    pub fn weight(&self) -> usize {
        match &self.content {
            Content::Text(text) => text.len(),
            Content::Image { base64, .. } => base64.len(),
        }
    }

    /// The text of a text result (an image has none).
    pub fn text(&self) -> Option<&str> {
        match &self.content {
            Content::Text(t) => Some(t),
            Content::Image { .. } => None,
        }
    }

    /// The `content` of a `tool_result` block: a string, or a list of blocks.
    pub fn content_json(&self) -> Value {
        match &self.content {
            Content::Text(t) => Value::String(t.clone()),
            Content::Image { media_type, base64 } => json!([{
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": base64},
            }]),
        }
    }

    /// `{"content": ..., "is_error": bool}`.
    pub fn to_json(&self) -> Value {
        json!({"content": self.content_json(), "is_error": self.is_error})
    }
}
