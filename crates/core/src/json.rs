//! Reading JSON from untrusted peers: every door parses its input here.
//!
//! Two rules beyond JSON's grammar. A duplicate key in an object is an error
//! (serde_json keeps the last one, so `{"command":"view","command":"delete"}`
//! would delete, while a policy filter in front of memfs that reads the first
//! one saw a view). And a message may hold at most [`MAX_VALUES`] values, so
//! the memory a line costs is bounded by its length, not multiplied by the
//! size of a `Value` per `0,` of a huge array.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Values (objects, arrays, strings, numbers, ...) one message may hold. A
/// tool call holds about ten; an MCP `initialize` a few dozen.
pub const MAX_VALUES: usize = 10_000;

/// Parses one whole JSON document under the rules above. The error says
/// what is wrong, and where, without echoing the input.
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let left = Cell::new(MAX_VALUES);
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    Strict { left: &left }
        .deserialize(&mut reader)
        .and_then(|v| reader.end().map(|()| v))
}

/// A value that counts itself against the message's budget.
#[derive(Clone, Copy)]
struct Strict<'a> {
    left: &'a Cell<usize>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.left.get().checked_sub(1) {
            Some(left) => self.left.set(left),
            None => {
                return Err(de::Error::custom(format_args!(
                    "the message holds more than {MAX_VALUES} JSON values"
                )))
            }
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the key `{}` appears twice in one object",
                    crate::text::clip(&key)
                )));
            }
            let value = map.next_value_seed(self)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_serde_json_reads() {
        let text = r#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"u":18446744073709551615}"#;
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        assert_eq!(parse(b" 7 ").unwrap(), json!(7));
    }

    #[test]
    fn refuses_duplicate_keys_at_any_depth() {
        let err = parse(br#"{"command":"view","command":"delete","path":"/memories"}"#);
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("`command` appears twice"));
        let nested = parse(br#"{"input":{"path":"a","path":"b"}}"#);
        assert!(nested
            .unwrap_err()
            .to_string()
            .contains("`path` appears twice"));
        // The same key in sibling objects is fine.
        assert!(parse(br#"[{"a":1},{"a":2}]"#).is_ok());
    }

    #[test]
    fn bounds_the_number_of_values() {
        let at_limit = format!("[{}]", vec!["0"; MAX_VALUES - 1].join(","));
        assert!(parse(at_limit.as_bytes()).is_ok());
        let over = format!("[{}]", vec!["0"; MAX_VALUES].join(","));
        assert!(parse(over.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("more than 10000 JSON values"));
    }

    #[test]
    fn trailing_garbage_is_an_error() {
        assert!(parse(b"{} x").is_err());
    }
}
