//! The `SessionStart` hook `memfs claude-code enable` adds to Claude Code's
//! user settings (`~/.claude/settings.json`, or `$CLAUDE_CONFIG_DIR`'s), so
//! that the memory is mounted again whenever Claude Code starts after a
//! reboot, a logout or a killed mount: it runs `memfs claude-code ensure`.
//!
//! The settings are a person's file: only the `hooks` entry is rewritten;
//! every other top-level key keeps its place and its text, and a file that
//! is not a JSON object is left alone (the caller says so).

use crate::cli_error::CliError;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// What marks memfs' own hook among the others.
const MARK: &str = "claude-code ensure";

/// The top-level keys of a settings file in their order, each with its
/// value's text as written.
struct Ordered(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, Box<RawValue>>()? {
                    out.push(entry);
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Claude Code's user settings file under its config dir.
pub fn settings_path(config: &Path) -> PathBuf {
    config.join("settings.json")
}

/// The settings as they are (none: an empty object).
fn read(path: &Path) -> Result<Ordered, CliError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) if t.trim().is_empty() => return Ok(Ordered(Vec::new())),
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ordered(Vec::new())),
        Err(e) => return Err(CliError::io("read", path)(e)),
    };
    serde_json::from_str(&text).map_err(|e| {
        CliError::Said(format!(
            "{} is not a JSON object Claude Code can read ({e}); it was left as it is",
            path.display()
        ))
    })
}

/// Writes the settings back (a temporary file renamed over the old one).
fn write(path: &Path, settings: &Ordered) -> Result<(), CliError> {
    let body: Vec<String> = settings
        .0
        .iter()
        .map(|(k, v)| format!("  {}: {}", Value::from(k.as_str()), v.get()))
        .collect();
    let text = match body.is_empty() {
        true => "{}\n".to_string(),
        false => format!("{{\n{}\n}}\n", body.join(",\n")),
    };
    // (A settings file that is a link, as dotfile managers make it: the
    // file it names is the one rewritten, and the link stays.)
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(CliError::io("make", dir))?;
    }
    let tmp = path.with_extension(format!("json.memfs-{}", std::process::id()));
    let written = (|| {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        // Made private, then given the old file's mode: its secrets (an
        // `env`, an `apiKeyHelper`) are never readable by others meanwhile.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        if let Ok(old) = std::fs::metadata(&path) {
            file.set_permissions(old.permissions())?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::io("write", path)(e)
    })
}

/// Whether a hook (`{"type": "command", "command": ..}`) is memfs' own.
fn is_ours_hook(hook: &Value) -> bool {
    hook["command"]
        .as_str()
        .is_some_and(|c| c.trim_end().ends_with(MARK))
}

/// Whether a hook entry (`{"matcher": .., "hooks": [..]}`) holds memfs' own.
fn is_ours(entry: &Value) -> bool {
    entry["hooks"]
        .as_array()
        .is_some_and(|hooks| hooks.iter().any(is_ours_hook))
}

/// Takes memfs' own hooks out of the entries (an entry left with none
/// goes; a person's hooks beside memfs' in one entry stay).
fn without_ours(list: &mut Vec<Value>) {
    for entry in list.iter_mut() {
        if let Some(hooks) = entry.get_mut("hooks").and_then(Value::as_array_mut) {
            hooks.retain(|h| !is_ours_hook(h));
        }
    }
    list.retain(|e| e["hooks"].as_array().is_none_or(|h| !h.is_empty()));
}

/// The `hooks` value of the settings (an empty object when there is none).
fn hooks_of(settings: &Ordered) -> Result<Value, CliError> {
    match settings.0.iter().find(|(k, _)| k == "hooks") {
        None => Ok(json!({})),
        Some((_, raw)) => serde_json::from_str(raw.get())
            .map_err(|e| CliError::Said(format!("the settings' hooks cannot be read: {e}"))),
    }
}

/// Puts `hooks` back in its place (or last), or takes the key away when
/// it is empty.
fn set_hooks(settings: &mut Ordered, hooks: &Value) -> Result<(), CliError> {
    let empty = hooks.as_object().is_some_and(|m| m.is_empty());
    let at = settings.0.iter().position(|(k, _)| k == "hooks");
    if empty {
        if let Some(i) = at {
            settings.0.remove(i);
        }
        return Ok(());
    }
    let text = serde_json::to_string_pretty(hooks).map_err(|e| CliError::Said(e.to_string()))?;
    // (Indented as a value of the top-level object.)
    let text = text.replace('\n', "\n  ");
    let raw = RawValue::from_string(text).map_err(|e| CliError::Said(e.to_string()))?;
    match at {
        Some(i) => settings.0[i].1 = raw,
        None => settings.0.push(("hooks".to_string(), raw)),
    }
    Ok(())
}

/// The shell command the hook runs: this very memfs (an absolute path, as
/// the hook's PATH may not have it), quoted.
pub fn command(exe: &Path) -> String {
    let exe = exe.to_string_lossy().replace('\'', r"'\''");
    format!("'{exe}' {MARK}")
}

/// Adds memfs' `SessionStart` hook running `command` to the settings at
/// `path` (or puts it right, when an older memfs' command is there);
/// whether the file changed.
pub fn install(path: &Path, command: &str) -> Result<bool, CliError> {
    let mut settings = read(path)?;
    let mut hooks = hooks_of(&settings)?;
    let Some(map) = hooks.as_object_mut() else {
        return Err(CliError::Said(format!(
            "the hooks in {} are not an object; left as they are",
            path.display()
        )));
    };
    let starts = map.entry("SessionStart").or_insert_with(|| json!([]));
    let Some(list) = starts.as_array_mut() else {
        return Err(CliError::Said(format!(
            "the SessionStart hooks in {} are not a list; left as they are",
            path.display()
        )));
    };
    let ours = json!({"hooks": [{"type": "command", "command": command, "timeout": 60}]});
    if list.iter().any(|e| e == &ours) {
        return Ok(false);
    }
    without_ours(list);
    list.push(ours);
    set_hooks(&mut settings, &hooks)?;
    write(path, &settings).map(|()| true)
}

/// Takes memfs' `SessionStart` hook out of the settings at `path`;
/// whether it was there.
pub fn remove(path: &Path) -> Result<bool, CliError> {
    let mut settings = read(path)?;
    let mut hooks = hooks_of(&settings)?;
    let Some(list) = hooks.get_mut("SessionStart").and_then(Value::as_array_mut) else {
        return Ok(false);
    };
    if !list.iter().any(is_ours) {
        return Ok(false);
    }
    without_ours(list);
    if list.is_empty() {
        hooks.as_object_mut().map(|m| m.remove("SessionStart"));
    }
    set_hooks(&mut settings, &hooks)?;
    write(path, &settings).map(|()| true)
}

/// Whether memfs' hook is in the settings at `path`.
pub fn installed(path: &Path) -> bool {
    read(path).and_then(|s| hooks_of(&s)).is_ok_and(|h| {
        h["SessionStart"]
            .as_array()
            .is_some_and(|l| l.iter().any(is_ours))
    })
}

/// Sets the top-level key `key` of the settings file at `path` to the
/// string `value` (`None`: takes it out), every other key as it was.
pub fn set_key(path: &Path, key: &str, value: Option<&str>) -> Result<(), CliError> {
    let mut settings = read(path)?;
    settings.0.retain(|(k, _)| k != key);
    if let Some(value) = value {
        let raw = RawValue::from_string(Value::from(value).to_string())
            .map_err(|e| CliError::Said(format!("cannot write {key}: {e}")))?;
        settings.0.push((key.to_string(), raw));
    }
    write(path, &settings)
}

/// The string the settings file at `path` holds at `key`, if any.
pub fn get_key(path: &Path, key: &str) -> Option<String> {
    let settings = read(path).ok()?;
    let (_, raw) = settings.0.iter().find(|(k, _)| k == key)?;
    serde_json::from_str::<String>(raw.get()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_goes_in_and_out_and_leaves_the_rest_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let before = "{\n  \"zeta\": 1,\n  \"model\": \"opus\",\n  \"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"true\"}]}]},\n  \"alpha\": {\"b\": 2, \"a\": 1}\n}\n";
        std::fs::write(&path, before).unwrap();
        assert!(install(&path, "'/x/memfs' claude-code ensure").unwrap());
        assert!(!install(&path, "'/x/memfs' claude-code ensure").unwrap());
        assert!(installed(&path));
        let text = std::fs::read_to_string(&path).unwrap();
        // Order and text of the other keys kept.
        let zeta = text.find("\"zeta\"").unwrap();
        let model = text.find("\"model\"").unwrap();
        assert!(
            zeta < model && text.contains("{\"b\": 2, \"a\": 1}"),
            "{text}"
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "true");
        // A newer memfs' path replaces the older one's.
        assert!(install(&path, "'/y/memfs' claude-code ensure").unwrap());
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["hooks"]["SessionStart"].as_array().unwrap().len(), 1);
        assert!(remove(&path).unwrap());
        assert!(!remove(&path).unwrap() && !installed(&path));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(v["hooks"].get("SessionStart").is_none() && v["hooks"]["Stop"].is_array());
    }

    #[test]
    fn a_persons_hook_beside_memfs_in_one_entry_stays_and_a_link_stays_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles-settings.json");
        let before = r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}, {"type": "command", "command": "'/x/memfs' claude-code ensure"}]}]}}"#;
        std::fs::write(&real, before).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let path = dir.path().join("settings.json");
        std::os::unix::fs::symlink(&real, &path).unwrap();
        assert!(remove(&path).unwrap());
        assert!(std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
        assert_eq!(
            v["hooks"]["SessionStart"][0]["hooks"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            v["hooks"]["SessionStart"][0]["hooks"][0]["command"],
            "echo hi"
        );
    }

    #[test]
    fn a_file_that_is_not_an_object_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "[1, 2").unwrap();
        assert!(install(&path, "x claude-code ensure").is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1, 2");
        // No file: made with the hook alone.
        let fresh = dir.path().join("new/settings.json");
        assert!(install(&fresh, "x claude-code ensure").unwrap() && installed(&fresh));
        assert!(remove(&fresh).unwrap());
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "{}\n");
    }
}
