//! Turning a JSON tool input into a [`Command`], with an error that names the
//! field for anything missing or mistyped.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    View {
        path: String,
        view_range: Option<(i64, i64)>,
    },
    Create {
        path: String,
        file_text: String,
    },
    StrReplace {
        path: String,
        old_str: String,
        new_str: String,
    },
    Insert {
        path: String,
        insert_line: i64,
        insert_text: String,
    },
    Delete {
        path: String,
    },
    Rename {
        old_path: String,
        new_path: String,
    },
}

pub const COMMANDS: [&str; 6] = [
    "view",
    "create",
    "str_replace",
    "insert",
    "delete",
    "rename",
];

/// Parses a tool input object. The error is the text for the agent.
pub fn parse(input: &Value) -> Result<Command, String> {
    let Value::Object(obj) = input else {
        return Err(format!(
            "Error: the tool input must be a JSON object, not {}",
            kind(input)
        ));
    };
    let command = match obj.get("command") {
        None => return Err("Error: missing required field `command`".into()),
        Some(Value::String(c)) => c.as_str(),
        Some(other) => {
            return Err(format!(
                "Error: field `command` must be a string, not {}",
                kind(other)
            ))
        }
    };
    let f = Fields { obj, command };
    Ok(match command {
        "view" => Command::View {
            path: f.string("path")?,
            view_range: f.view_range()?,
        },
        "create" => Command::Create {
            path: f.string("path")?,
            file_text: f.string("file_text")?,
        },
        "str_replace" => Command::StrReplace {
            path: f.string("path")?,
            old_str: f.string("old_str")?,
            new_str: f.optional_string("new_str")?.unwrap_or_default(),
        },
        "insert" => Command::Insert {
            path: f.string("path")?,
            insert_line: f.integer("insert_line")?,
            insert_text: f.string("insert_text")?,
        },
        "delete" => Command::Delete {
            path: f.string("path")?,
        },
        "rename" => Command::Rename {
            old_path: f.string("old_path")?,
            new_path: f.string("new_path")?,
        },
        other => {
            return Err(format!(
                "Error: unknown command `{}`; the memory tool's commands are {}",
                crate::text::clip(other),
                COMMANDS.join(", ")
            ))
        }
    })
}

/// A program's precondition on a write (`expected_sha256`: 64 hex digits).
pub fn expected_sha256(input: &Value) -> Result<Option<String>, String> {
    match input.get("expected_sha256") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(Some(s.to_ascii_lowercase()))
        }
        Some(_) => Err("Error: field `expected_sha256` must be a sha256 as 64 hex digits".into()),
    }
}

struct Fields<'a> {
    obj: &'a serde_json::Map<String, Value>,
    command: &'a str,
}

impl Fields<'_> {
    fn optional_string(&self, name: &str) -> Result<Option<String>, String> {
        match self.obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.mistyped(name, "a string", other)),
        }
    }

    fn string(&self, name: &str) -> Result<String, String> {
        self.optional_string(name)?
            .ok_or_else(|| self.missing(name))
    }

    fn integer(&self, name: &str) -> Result<i64, String> {
        match self.obj.get(name) {
            None | Some(Value::Null) => Err(self.missing(name)),
            Some(v) => loose_integer(v).ok_or_else(|| self.mistyped(name, "an integer", v)),
        }
    }

    fn view_range(&self) -> Result<Option<(i64, i64)>, String> {
        let bad = || {
            format!(
                "Error: field `view_range` of command `{}` must be an array of two integers, [start_line, end_line]",
                self.command
            )
        };
        match self.obj.get("view_range") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) if items.len() == 2 => {
                match (loose_integer(&items[0]), loose_integer(&items[1])) {
                    (Some(start), Some(end)) => Ok(Some((start, end))),
                    _ => Err(bad()),
                }
            }
            Some(_) => Err(bad()),
        }
    }

    fn missing(&self, name: &str) -> String {
        format!(
            "Error: missing required field `{name}` for command `{}`",
            self.command
        )
    }

    fn mistyped(&self, name: &str, want: &str, got: &Value) -> String {
        format!(
            "Error: field `{name}` of command `{}` must be {want}, not {}",
            self.command,
            kind(got)
        )
    }
}

/// An integer as a model may spell it: `2`, `2.0`, or the string `"2"`
/// (`" 2 "`, `"+2"`, `"02"`, `"2.0"`), as the SDK's lax parsing takes it.
/// Not a boolean, a fraction, an exponent or any other text: those are errors.
fn loose_integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
        }),
        Value::String(s) => {
            let s = s.trim();
            let whole = match s.split_once('.') {
                Some((whole, zeros)) if zeros.bytes().all(|b| b == b'0') => whole,
                Some(_) => return None,
                None => s,
            };
            let digits = whole.strip_prefix(['+', '-']).unwrap_or(whole);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            whole.parse().ok()
        }
        _ => None,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer out of range",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_each_command() {
        assert_eq!(
            parse(&json!({"command":"view","path":"/memories","view_range":[1,-1]})),
            Ok(Command::View {
                path: "/memories".into(),
                view_range: Some((1, -1))
            })
        );
        assert_eq!(
            parse(&json!({"command":"str_replace","path":"/memories/a","old_str":"x"})),
            Ok(Command::StrReplace {
                path: "/memories/a".into(),
                old_str: "x".into(),
                new_str: String::new()
            })
        );
        assert!(matches!(
            parse(
                &json!({"command":"insert","path":"/memories/a","insert_line":0,"insert_text":""})
            ),
            Ok(Command::Insert { insert_line: 0, .. })
        ));
    }

    /// Long because it is a table: one row per malformed tool input with
    /// the error text it must name, checked by one short loop.
    #[test]
    fn names_what_is_wrong() {
        let cases = [
            (json!([1, 2]), "must be a JSON object, not an array"),
            (json!({}), "missing required field `command`"),
            (
                json!({"command": 7}),
                "field `command` must be a string, not an integer",
            ),
            (json!({"command": "fly"}), "unknown command `fly`"),
            (
                json!({"command": "view"}),
                "missing required field `path` for command `view`",
            ),
            (
                json!({"command": "view", "path": 3}),
                "field `path` of command `view` must be a string",
            ),
            (
                json!({"command": "view", "path": "/memories", "view_range": [1]}),
                "must be an array of two integers",
            ),
            (
                json!({"command": "view", "path": "/memories", "view_range": "1-2"}),
                "must be an array of two integers",
            ),
            (
                json!({"command": "create", "path": "/memories/a"}),
                "missing required field `file_text`",
            ),
            (
                json!({"command": "insert", "path": "/memories/a", "insert_line": "two", "insert_text": ""}),
                "must be an integer, not a string",
            ),
            (
                json!({"command": "insert", "path": "/memories/a", "insert_line": "1e0", "insert_text": ""}),
                "must be an integer, not a string",
            ),
            (
                json!({"command": "insert", "path": "/memories/a", "insert_line": true, "insert_text": ""}),
                "must be an integer, not a boolean",
            ),
            (
                json!({"command": "view", "path": "/memories", "view_range": [1, 2, 3]}),
                "must be an array of two integers",
            ),
            (
                json!({"command": "view", "path": "/memories", "view_range": ["a", "b"]}),
                "must be an array of two integers",
            ),
            (
                json!({"command": "insert", "path": "/memories/a", "insert_line": 1.5, "insert_text": ""}),
                "must be an integer, not a number",
            ),
            (
                json!({"command": "insert", "path": "/memories/a", "insert_line": u64::MAX, "insert_text": ""}),
                "an integer out of range",
            ),
            (
                json!({"command": "rename", "old_path": "/memories/a"}),
                "missing required field `new_path` for command `rename`",
            ),
            (
                json!({"command": "str_replace", "path": "/memories/a", "old_str": "a", "new_str": 5}),
                "field `new_str` of command `str_replace` must be a string",
            ),
        ];
        for (input, want) in cases {
            let err = parse(&input).unwrap_err();
            assert!(err.starts_with("Error: "), "{err}");
            assert!(err.contains(want), "{input} gave {err:?}, want {want:?}");
        }
    }

    #[test]
    fn takes_integers_as_a_model_may_spell_them() {
        for (given, want) in [
            (json!(2), 2),
            (json!(2.0), 2),
            (json!("2"), 2),
            (json!(" 2 "), 2),
            (json!("+2"), 2),
            (json!("02"), 2),
            (json!("2.0"), 2),
            (json!("-1"), -1),
        ] {
            let input = json!({"command": "insert", "path": "/memories/a", "insert_line": given, "insert_text": ""});
            assert!(
                matches!(parse(&input), Ok(Command::Insert { insert_line, .. }) if insert_line == want),
                "{given}"
            );
        }
        assert_eq!(
            parse(&json!({"command": "view", "path": "/memories/a", "view_range": ["1", "-1"]})),
            Ok(Command::View {
                path: "/memories/a".into(),
                view_range: Some((1, -1))
            })
        );
    }

    #[test]
    fn clips_long_echoes() {
        assert_eq!(crate::text::clip("abc"), "abc");
        assert_eq!(crate::text::clip(&"é".repeat(300)).chars().count(), 201);
    }
}
