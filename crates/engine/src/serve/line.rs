//! One line of the JSON-lines protocol: a tool input or a `tool_use` block in,
//! a result or a `tool_result` block out. Shared by every line transport.

use serde_json::{json, Value};

use crate::tool::{Pending, Tool, ToolResult};

/// How the answer to a line is framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// `{"content": ..., "is_error": bool}`.
    Plain,
    /// A `tool_result` block for the `tool_use` block with this id.
    ToolResult { tool_use_id: String },
    /// Already rendered: sent as it is.
    Rendered(String),
}

/// The answer to one line, ready once its change is durable.
pub struct Answer {
    pub pending: Option<Pending>,
    pub ready: Option<ToolResult>,
    pub framing: Framing,
}

impl Answer {
    fn now(result: ToolResult, framing: Framing) -> Self {
        Answer {
            pending: None,
            ready: Some(result),
            framing,
        }
    }

    /// About how many bytes the answer holds until it is written.
    pub fn weight(&self) -> usize {
        match (&self.pending, &self.ready) {
            (Some(pending), _) => pending.weight(),
            (None, Some(result)) => result.weight(),
            (None, None) => 0,
        }
    }

    /// An answer already rendered (a control line's).
    pub fn text(answer: String) -> Self {
        Answer {
            pending: None,
            ready: None,
            framing: Framing::Rendered(answer),
        }
    }

    /// Waits for durability and renders the answer line (without newline).
    pub fn finish(self) -> String {
        let result = match (self.pending, self.ready) {
            (Some(pending), _) => pending.finish(),
            (None, Some(result)) => result,
            (None, None) => ToolResult::error(""),
        };
        render(&result, &self.framing)
    }
}

pub fn render(result: &ToolResult, framing: &Framing) -> String {
    let value = match framing {
        Framing::Rendered(text) => return text.clone(),
        Framing::Plain => result.to_json(),
        Framing::ToolResult { tool_use_id } => json!({
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": result.content_json(),
            "is_error": result.is_error,
        }),
    };
    value.to_string()
}

/// A line longer than the transport accepts.
pub fn too_long(limit: usize) -> Answer {
    let text = format!(
        "Error: the line is longer than {limit} bytes and was not read; send smaller commands"
    );
    Answer::now(ToolResult::error(text), Framing::Plain)
}

/// The last answer to a peer that did not finish its line in time.
pub fn timed_out(after: std::time::Duration) -> Answer {
    let text = format!(
        "Error: the line was not finished within {} seconds; closing the connection",
        after.as_secs()
    );
    Answer::now(ToolResult::error(text), Framing::Plain)
}

/// Parses and applies one line.
pub fn handle(tool: &Tool, line: &[u8]) -> Answer {
    let value: Value = match crate::json::parse(line) {
        Ok(v) => v,
        Err(e) => {
            return Answer::now(
                ToolResult::error(format!("Error: the line is not valid JSON: {e}")),
                Framing::Plain,
            )
        }
    };
    match value.get("type") {
        None => Answer {
            pending: Some(tool.start(&value)),
            ready: None,
            framing: Framing::Plain,
        },
        Some(Value::String(t)) if t == "tool_use" => tool_use(tool, &value),
        Some(other) => {
            let shown = other
                .as_str()
                .map(crate::text::clip)
                .unwrap_or_else(|| other.to_string());
            let mut text = format!(
                "Error: a line must be a memory tool input or a tool_use block, not a `{}` block",
                crate::text::clip(&shown)
            );
            if shown.starts_with("memfs_") {
                text.push_str(" (memfs' own control lines need the owner's key, which an agent never has; an application clears a memory with `memfs clear` or its adapter's clear_all_memory)");
            }
            Answer::now(ToolResult::error(text), Framing::Plain)
        }
    }
}

fn tool_use(tool: &Tool, block: &Value) -> Answer {
    let Some(id) = block.get("id").and_then(Value::as_str) else {
        let text = "Error: a tool_use block needs a string `id` to answer with a tool_result";
        return Answer::now(ToolResult::error(text), Framing::Plain);
    };
    let framing = Framing::ToolResult {
        tool_use_id: id.to_string(),
    };
    match block.get("name").and_then(Value::as_str) {
        Some("memory") => {}
        other => {
            let text = format!(
                "Error: this server runs the `memory` tool, not `{}`",
                crate::text::clip(other.unwrap_or("(no name)"))
            );
            return Answer::now(ToolResult::error(text), framing);
        }
    }
    let Some(input) = block.get("input") else {
        return Answer::now(
            ToolResult::error("Error: the tool_use block has no `input`"),
            framing,
        );
    };
    Answer {
        pending: Some(tool.start(input)),
        ready: None,
        framing,
    }
}
