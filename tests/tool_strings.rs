//! Every success and error string of every command, through the library's
//! tool over an in-memory store.

use std::sync::Arc;

use memfs::store::{Limits, Store, Tree};
use memfs::tool::{Content, Tool, ToolConfig, ToolResult};
use serde_json::{json, Value};

fn tool_with(limits: Limits, config: ToolConfig) -> Tool {
    Tool::new(Arc::new(Store::new(Tree::new(), limits, None)), config)
}

fn tool() -> Tool {
    tool_with(Limits::default(), ToolConfig::default())
}

#[track_caller]
fn ok(tool: &Tool, input: Value) -> String {
    let r = tool.call(&input);
    assert!(!r.is_error, "{input} failed: {r:?}");
    r.text().expect("text result").to_string()
}

#[track_caller]
fn err(tool: &Tool, input: Value) -> String {
    let r = tool.call(&input);
    assert!(r.is_error, "{input} should fail: {r:?}");
    r.text().expect("text result").to_string()
}

fn create(t: &Tool, path: &str, text: &str) {
    ok(
        t,
        json!({"command": "create", "path": path, "file_text": text}),
    );
}

#[test]
fn view_of_an_empty_store_lists_the_root() {
    assert_eq!(
        ok(&tool(), json!({"command": "view", "path": "/memories"})),
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0\t/memories"
    );
}

#[test]
fn view_directory_two_levels_sorted_with_sizes() {
    let t = tool();
    create(&t, "/memories/b.txt", &"x".repeat(1536));
    create(&t, "/memories/a/one.md", "1\n");
    create(&t, "/memories/a/deep/two.md", "22\n");
    create(&t, "/memories/a/deep/deeper/three.md", "333\n");
    create(&t, "/memories/.hidden/x", "secret");
    create(&t, "/memories/a/.swp", "s");
    create(&t, "/memories/node_modules/m.js", "m");
    create(&t, "/memories/big", &"y".repeat(11 * 1024));
    let want = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
        13K\t/memories\n\
        10\t/memories/a/\n\
        7\t/memories/a/deep/\n\
        2\t/memories/a/one.md\n\
        1.5K\t/memories/b.txt\n\
        11K\t/memories/big";
    assert_eq!(
        ok(&t, json!({"command": "view", "path": "/memories"})),
        want
    );
    let sub = ok(&t, json!({"command": "view", "path": "/memories/a/"}));
    assert_eq!(
        sub,
        "Here're the files and directories up to 2 levels deep in /memories/a, excluding hidden items and node_modules:\n\
         10\t/memories/a\n7\t/memories/a/deep/\n4\t/memories/a/deep/deeper/\n3\t/memories/a/deep/two.md\n2\t/memories/a/one.md"
    );
}

#[test]
fn view_file_numbers_lines_and_ranges() {
    let t = tool();
    create(&t, "/memories/n.txt", "one\ntwo\nthree\n");
    let head = "Here's the content of /memories/n.txt with line numbers:\n";
    assert_eq!(
        ok(&t, json!({"command": "view", "path": "/memories/n.txt"})),
        format!("{head}     1\tone\n     2\ttwo\n     3\tthree")
    );
    assert_eq!(
        ok(
            &t,
            json!({"command": "view", "path": "/memories/n.txt", "view_range": [2, -1]})
        ),
        format!("{head}     2\ttwo\n     3\tthree")
    );
    assert_eq!(
        ok(
            &t,
            json!({"command": "view", "path": "/memories/n.txt", "view_range": [2, 2]})
        ),
        format!("{head}     2\ttwo")
    );
    for range in [[0, 2], [3, 2], [1, 4], [4, -1], [-1, -1], [2, -2]] {
        let e = err(
            &t,
            json!({"command": "view", "path": "/memories/n.txt", "view_range": range}),
        );
        assert_eq!(
            e,
            format!(
                "Error: Invalid `view_range` parameter: [{}, {}]. The file /memories/n.txt has 3 lines; `view_range` takes \
                 [start_line, end_line] with 1 <= start_line <= end_line <= 3, or end_line = -1 for the end of the file.",
                range[0], range[1]
            )
        );
    }
    create(&t, "/memories/empty", "");
    assert_eq!(
        ok(&t, json!({"command": "view", "path": "/memories/empty"})),
        "Here's the content of /memories/empty with line numbers:\n"
    );
}

#[test]
fn view_of_a_missing_path() {
    let t = tool();
    create(&t, "/memories/f", "x");
    for path in [
        "/memories/nope",
        "/memories/f/under-a-file",
        "/memories/a/b/c",
    ] {
        assert_eq!(
            err(&t, json!({"command": "view", "path": path})),
            format!("The path {path} does not exist. Please provide a valid path.")
        );
    }
}

#[test]
fn view_caps_long_files_at_whole_lines() {
    let t = tool();
    let text: String = (1..=3000).map(|i| format!("line number {i}\n")).collect();
    create(&t, "/memories/long.txt", &text);
    let out = ok(&t, json!({"command": "view", "path": "/memories/long.txt"}));
    let body = out.split_once('\n').unwrap().1;
    let (rows, note) = body.rsplit_once('\n').unwrap();
    assert!(rows.chars().count() <= 16_000);
    let last: usize = rows
        .lines()
        .last()
        .unwrap()
        .split('\t')
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        note.starts_with(&format!("[showing lines 1-{last} of 3000")),
        "{note}"
    );
    assert!(
        note.contains(&format!("view_range [{}, -1]", last + 1)),
        "{note}"
    );
    // Following the hint continues exactly where the view stopped.
    let next = ok(
        &t,
        json!({"command": "view", "path": "/memories/long.txt", "view_range": [last + 1, last + 1]}),
    );
    assert!(
        next.ends_with(&format!("\tline number {}", last + 1)),
        "{next}"
    );
}

#[test]
fn view_refuses_too_many_lines() {
    let t = tool_with(
        Limits {
            max_file_size: 4 << 20,
            max_store_size: 8 << 20,
            ..Limits::default()
        },
        ToolConfig::default(),
    );
    create(&t, "/memories/many", &"\n".repeat(1_000_000));
    assert_eq!(
        err(&t, json!({"command": "view", "path": "/memories/many"})),
        "File /memories/many exceeds maximum line limit of 999,999 lines."
    );
    create(&t, "/memories/just", &"\n".repeat(999_999));
    assert!(
        !t.call(&json!({"command": "view", "path": "/memories/just", "view_range": [999_999, -1]}))
            .is_error
    );
}

#[test]
fn view_images_and_binary_files() {
    let t = tool();
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    let store = t.store().clone();
    let put = |path: &str, bytes: Vec<u8>| {
        let p = memfs::path::MemPath::parse(path).unwrap();
        store
            .create_file(
                &p,
                bytes,
                true,
                memfs::store::Origin::agent(memfs::store::Door::Library),
            )
            .unwrap()
            .wait()
            .unwrap();
    };
    put("/memories/pic.png", png.clone());
    put("/memories/anim.gif", b"GIF89a\x01\x00".to_vec());
    put("/memories/fake.jpg", b"not really".to_vec());
    put("/memories/blob.bin", vec![0xff, 0xfe, 0x00]);
    let r = t.call(&json!({"command": "view", "path": "/memories/pic.png"}));
    assert_eq!(
        r,
        ToolResult {
            content: Content::Image {
                media_type: "image/png",
                base64: "iVBORw0KGgoAAAANSUhEUg==".into()
            },
            is_error: false
        }
    );
    assert_eq!(
        r.content_json(),
        json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}}])
    );
    let gif = t.call(&json!({"command": "view", "path": "/memories/anim.gif"}));
    assert!(matches!(
        gif.content,
        Content::Image {
            media_type: "image/gif",
            ..
        }
    ));
    // A readable text file is viewable whatever its name.
    let fake = t.call(&json!({"command": "view", "path": "/memories/fake.jpg"}));
    assert_eq!(
        fake.content_json(),
        json!("Here's the content of /memories/fake.jpg with line numbers:\n     1\tnot really")
    );
    assert_eq!(
        err(&t, json!({"command": "view", "path": "/memories/blob.bin"})),
        "Error: /memories/blob.bin is not a UTF-8 text file or a PNG, JPEG, GIF or WebP image, so it cannot be viewed"
    );
    // No command rewrites a binary file's bytes.
    for input in [
        json!({"command": "str_replace", "path": "/memories/blob.bin", "old_str": "a", "new_str": "b"}),
        json!({"command": "insert", "path": "/memories/blob.bin", "insert_line": 0, "insert_text": "a"}),
    ] {
        assert_eq!(
            err(&t, input),
            "Error: /memories/blob.bin is not a UTF-8 text file; memfs does not edit its bytes"
        );
    }
}

#[test]
fn image_over_five_mib_is_refused() {
    let t = tool_with(
        Limits {
            max_file_size: 8 << 20,
            max_store_size: 16 << 20,
            ..Limits::default()
        },
        ToolConfig::default(),
    );
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.resize((5 << 20) + 1, 0);
    let p = memfs::path::MemPath::parse("/memories/huge.png").unwrap();
    t.store()
        .create_file(
            &p,
            png,
            false,
            memfs::store::Origin::agent(memfs::store::Door::Library),
        )
        .unwrap();
    assert_eq!(
        err(&t, json!({"command": "view", "path": "/memories/huge.png"})),
        "Error: the image /memories/huge.png is 5242881 bytes, over the 5242880 byte limit for viewing an image"
    );
}

#[test]
fn create_strings() {
    let t = tool();
    assert_eq!(
        ok(
            &t,
            json!({"command": "create", "path": "/memories/a/b/c.txt", "file_text": "x"})
        ),
        "File created successfully at: /memories/a/b/c.txt"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "create", "path": "/memories/a/b/c.txt", "file_text": "y"})
        ),
        "Error: File /memories/a/b/c.txt already exists"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "create", "path": "/memories/a/b", "file_text": "y"})
        ),
        "Error: /memories/a/b is a directory; create writes files only"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "create", "path": "/memories", "file_text": "y"})
        ),
        "Error: /memories is a directory; create writes files only"
    );
    assert_eq!(
        err(&t, json!({"command": "create", "path": "/memories/a/b/c.txt/d", "file_text": "y"})),
        "Error: Cannot create /memories/a/b/c.txt/d: a component of its path is a file, not a directory"
    );
    // The original is untouched by the refused create.
    assert!(ok(
        &t,
        json!({"command": "view", "path": "/memories/a/b/c.txt"})
    )
    .ends_with("     1\tx"));
}

#[test]
fn create_overwrites_when_configured() {
    let t = tool_with(
        Limits::default(),
        ToolConfig {
            create_overwrites: true,
            ..ToolConfig::default()
        },
    );
    create(&t, "/memories/f", "old");
    create(&t, "/memories/f", "new");
    assert!(ok(&t, json!({"command": "view", "path": "/memories/f"})).ends_with("     1\tnew"));
    assert!(err(
        &t,
        json!({"command": "create", "path": "/memories", "file_text": ""})
    )
    .contains("is a directory"));
}

#[test]
fn str_replace_strings() {
    let t = tool();
    create(
        &t,
        "/memories/p.txt",
        "Favorite color: blue\nsize: M\nsize: M\n",
    );
    assert_eq!(
        ok(&t, json!({"command": "str_replace", "path": "/memories/p.txt", "old_str": "blue", "new_str": "green"})),
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n\
         \u{20}    1\tFavorite color: green\n     2\tsize: M\n     3\tsize: M"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "str_replace", "path": "/memories/p.txt", "old_str": "red", "new_str": "x"})
        ),
        "No replacement was performed, old_str `red` did not appear verbatim in /memories/p.txt."
    );
    assert_eq!(
        err(&t, json!({"command": "str_replace", "path": "/memories/p.txt", "old_str": "size: M", "new_str": "x"})),
        "No replacement was performed. Multiple occurrences of old_str `size: M` in lines: 2, 3. Please ensure it is unique"
    );
    for path in ["/memories/none.txt", "/memories", "/memories/p.txt/x"] {
        assert_eq!(
            err(
                &t,
                json!({"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"})
            ),
            format!("Error: The path {path} does not exist. Please provide a valid path.")
        );
    }
    assert_eq!(
        err(
            &t,
            json!({"command": "str_replace", "path": "/memories/p.txt", "old_str": "", "new_str": "b"})
        ),
        "Error: `old_str` must not be empty: give the exact text to replace"
    );
    // new_str omitted deletes the match; multi-line old_str works.
    ok(
        &t,
        json!({"command": "str_replace", "path": "/memories/p.txt", "old_str": "green\nsize: M\n"}),
    );
    assert_eq!(
        ok(&t, json!({"command": "view", "path": "/memories/p.txt"})),
        "Here's the content of /memories/p.txt with line numbers:\n     1\tFavorite color: size: M"
    );
}

#[test]
fn insert_strings() {
    let t = tool();
    create(&t, "/memories/todo.txt", "a\nb\n");
    assert_eq!(
        ok(
            &t,
            json!({"command": "insert", "path": "/memories/todo.txt", "insert_line": 2, "insert_text": "- c\n"})
        ),
        "The file /memories/todo.txt has been edited."
    );
    assert_eq!(
        ok(&t, json!({"command": "view", "path": "/memories/todo.txt"})),
        "Here's the content of /memories/todo.txt with line numbers:\n     1\ta\n     2\tb\n     3\t- c"
    );
    for line in [-1, 4, 1000] {
        assert_eq!(
            err(&t, json!({"command": "insert", "path": "/memories/todo.txt", "insert_line": line, "insert_text": "x"})),
            format!("Error: Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, 3]")
        );
    }
    for path in ["/memories/none", "/memories"] {
        assert_eq!(
            err(
                &t,
                json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"})
            ),
            format!("Error: The path {path} does not exist")
        );
    }
}

#[test]
fn delete_strings() {
    let t = tool();
    create(&t, "/memories/d/e/f.txt", "x");
    create(&t, "/memories/g.txt", "x");
    assert_eq!(
        ok(&t, json!({"command": "delete", "path": "/memories/g.txt"})),
        "Successfully deleted /memories/g.txt"
    );
    assert_eq!(
        ok(&t, json!({"command": "delete", "path": "/memories/d"})),
        "Successfully deleted /memories/d"
    );
    assert_eq!(
        err(&t, json!({"command": "delete", "path": "/memories/d"})),
        "Error: The path /memories/d does not exist"
    );
    for root in ["/memories", "/memories/", "/memories//"] {
        assert_eq!(
            err(&t, json!({"command": "delete", "path": root})),
            "Error: Cannot delete the /memories directory itself"
        );
    }
    for spelled in ["/memories/.", "/memories/a/.."] {
        let e = err(&t, json!({"command": "delete", "path": spelled}));
        assert!(e.starts_with("Error: Invalid path"), "{e}");
    }
    assert_eq!(
        ok(&t, json!({"command": "view", "path": "/memories"}))
            .lines()
            .count(),
        2,
        "only the root line is left"
    );
}

#[test]
fn rename_strings() {
    let t = tool();
    create(&t, "/memories/draft.txt", "x");
    create(&t, "/memories/dir/inner.txt", "y");
    create(&t, "/memories/taken.txt", "z");
    assert_eq!(
        ok(
            &t,
            json!({"command": "rename", "old_path": "/memories/draft.txt", "new_path": "/memories/new/deep/final.txt"})
        ),
        "Successfully renamed /memories/draft.txt to /memories/new/deep/final.txt"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "rename", "old_path": "/memories/draft.txt", "new_path": "/memories/q/x"})
        ),
        "Error: The path /memories/draft.txt does not exist"
    );
    // The missing source made no parents of the destination.
    assert!(err(&t, json!({"command": "view", "path": "/memories/q"})).contains("does not exist"));
    assert_eq!(
        err(
            &t,
            json!({"command": "rename", "old_path": "/memories/new/deep/final.txt", "new_path": "/memories/taken.txt"})
        ),
        "Error: The destination /memories/taken.txt already exists"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories"})
        ),
        "Error: The destination /memories already exists"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "rename", "old_path": "/memories", "new_path": "/memories/x"})
        ),
        "Error: Cannot rename the /memories directory itself"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/dir/sub"})
        ),
        "Error: Cannot move /memories/dir into itself (/memories/dir/sub)"
    );
    assert_eq!(
        err(&t, json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/taken.txt/sub"})),
        "Error: Cannot move to /memories/taken.txt/sub: a component of its path is a file, not a directory"
    );
    assert_eq!(
        ok(
            &t,
            json!({"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/dir2"})
        ),
        "Successfully renamed /memories/dir to /memories/dir2"
    );
    assert!(ok(
        &t,
        json!({"command": "view", "path": "/memories/dir2/inner.txt"})
    )
    .ends_with("\ty"));
}

#[test]
fn hostile_paths_are_refused_by_every_command() {
    let t = tool();
    create(&t, "/memories/safe.txt", "x");
    let hostile = [
        "/memories/../../etc/passwd",
        "/memoriesX/a",
        "memories/a",
        "/etc/passwd",
        "/memories/%2e%2e/%2e%2e/etc",
        "/memories/..\\secret",
        "/memories/a\u{0}b",
    ];
    for path in hostile {
        let inputs = [
            json!({"command": "view", "path": path}),
            json!({"command": "create", "path": path, "file_text": "x"}),
            json!({"command": "str_replace", "path": path, "old_str": "x", "new_str": "y"}),
            json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"}),
            json!({"command": "delete", "path": path}),
            json!({"command": "rename", "old_path": path, "new_path": "/memories/b"}),
            json!({"command": "rename", "old_path": "/memories/safe.txt", "new_path": path}),
        ];
        for input in inputs {
            let e = err(&t, input.clone());
            assert!(e.starts_with("Error: Invalid path `"), "{input}: {e}");
        }
    }
    assert!(ok(&t, json!({"command": "view", "path": "/memories/safe.txt"})).ends_with("\tx"));
}

#[test]
fn limits_are_enforced_on_every_write() {
    let t = tool_with(
        Limits {
            max_file_size: 10,
            max_store_size: 15,
            ..Limits::default()
        },
        ToolConfig::default(),
    );
    assert_eq!(
        err(&t, json!({"command": "create", "path": "/memories/big", "file_text": "12345678901"})),
        "Error: Cannot create /memories/big: the file would be 11 bytes, over the limit of 10 bytes per file"
    );
    create(&t, "/memories/a", "1234567890");
    assert_eq!(
        err(&t, json!({"command": "create", "path": "/memories/b", "file_text": "123456"})),
        "Error: Cannot create /memories/b: the memory would hold 16 bytes, over the limit of 15 bytes in all"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "str_replace", "path": "/memories/a", "old_str": "1", "new_str": "11"})
        ),
        "Error: the file would be 11 bytes, over the limit of 10 bytes per file"
    );
    assert_eq!(
        err(
            &t,
            json!({"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "x"})
        ),
        "Error: the file would be 12 bytes, over the limit of 10 bytes per file"
    );
    // Shrinking is always allowed, even at the limit.
    ok(
        &t,
        json!({"command": "str_replace", "path": "/memories/a", "old_str": "12345", "new_str": ""}),
    );
    create(&t, "/memories/b", "123456");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let t = tool();
    assert_eq!(
        err(&t, json!("view")),
        "Error: the tool input must be a JSON object, not a string"
    );
    assert!(err(&t, json!({"command": "undo"})).starts_with("Error: unknown command `undo`"));
    assert_eq!(
        err(&t, json!({"command": "view"})),
        "Error: missing required field `path` for command `view`"
    );
}
