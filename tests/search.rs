//! `memfs search` through the doors people use: the CLI on a data dir with
//! no owner and beside one (a mount, where a person saves with a real
//! write), the index following every change, rebuilt when lost or damaged,
//! and a redacted content leaving it.

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn tool(dir: &Path, input: Value) {
    let (code, v, err) = exec_with(dir, &[], &input.to_string());
    assert_eq!(code, 0, "{v} {err}");
    assert_eq!(v["is_error"], false, "{v}");
}

fn create(dir: &Path, path: &str, text: &str) {
    tool(
        dir,
        json!({"command": "create", "path": path, "file_text": text}),
    );
}

/// `memfs search --json QUERY`: the paths found, best first, and the whole answer.
fn search(dir: &Path, query: &str, extra: &[&str]) -> (Vec<String>, Value) {
    let mut args = vec!["search", "--json"];
    args.extend(extra);
    args.extend(["--", query]);
    let (code, out, err) = run(dir, &args);
    assert!(code == 0 || code == 1, "{query}: {code} {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    let paths = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect::<Vec<_>>();
    assert_eq!(code == 0, !paths.is_empty(), "{query}: exit {code}");
    (paths, v)
}

fn found(dir: &Path, query: &str) -> Vec<String> {
    search(dir, query, &[]).0
}

fn seed(d: &Path) {
    create(
        d,
        "/memories/notes/http.md",
        "# Replies\nWe call parse_http_reply on each answer.\nThe HTTP reply parser is thread safe.\n",
    );
    create(
        d,
        "/memories/code/maps.rs",
        "use std::collections::HashMap;\nlet cache: HashMap<String, u32> = HashMap::new();\nserde_json::Value is parsed here\n",
    );
    create(
        d,
        "/memories/notes/draft.md",
        "A draft about serialization and a thread.\n",
    );
    create(d, "/memories/user_prefs.md", "Prefers tabs over spaces.\n");
}

#[test]
fn search_finds_words_identifiers_phrases_prefixes_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    seed(d);
    // A part of an identifier finds it, and the identifier finds its
    // parts written otherwise.
    assert_eq!(found(d, "http_reply"), ["/memories/notes/http.md"]);
    assert_eq!(found(d, "parseHttpReply"), ["/memories/notes/http.md"]);
    assert_eq!(found(d, "hash_map"), ["/memories/code/maps.rs"]);
    assert_eq!(found(d, "serde_json::Value"), ["/memories/code/maps.rs"]);
    // A phrase is its words in a row; a word alone is anywhere.
    assert_eq!(found(d, "\"thread safe\""), ["/memories/notes/http.md"]);
    let mut thread = found(d, "thread");
    thread.sort();
    assert_eq!(
        thread,
        ["/memories/notes/draft.md", "/memories/notes/http.md"]
    );
    // Every word must match; `-word` leaves out; `path:` narrows.
    assert_eq!(found(d, "thread -safe"), ["/memories/notes/draft.md"]);
    assert_eq!(
        found(d, "thread path:notes/draft.md"),
        ["/memories/notes/draft.md"]
    );
    // A path is the file or the directory, not a prefix of a name.
    assert!(found(d, "thread path:notes/dr").is_empty());
    let mut under = found(d, "thread path:/memories/notes/");
    under.sort();
    assert_eq!(
        under,
        ["/memories/notes/draft.md", "/memories/notes/http.md"]
    );
    assert_eq!(
        search(d, "thread", &["--path", "/memories/notes/draft.md"]).0,
        ["/memories/notes/draft.md"]
    );
    assert!(found(d, "thread tabs").is_empty());
    // Prefixes, and paths as words.
    let mut serial = found(d, "serial*");
    serial.sort();
    assert_eq!(serial, ["/memories/notes/draft.md"]);
    assert_eq!(found(d, "user_prefs"), ["/memories/user_prefs.md"]);
    assert_eq!(found(d, "prefs"), ["/memories/user_prefs.md"]);
    // Lines: the number, the snippet, the marks.
    let (_, v) = search(d, "parse_http_reply", &[]);
    let line = &v["results"][0]["lines"][0];
    assert_eq!(line["line"], 2);
    let snippet = line["snippet"].as_str().unwrap();
    assert_eq!(snippet, "We call parse_http_reply on each answer.");
    let [a, b] = [&line["highlights"][0][0], &line["highlights"][0][1]]
        .map(|n| n.as_u64().unwrap() as usize);
    assert_eq!(&snippet[a..b], "parse_http_reply");
    // The text form is grep's.
    let (code, out, _) = run(d, &["search", "tabs"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "/memories/user_prefs.md:1: Prefers tabs over spaces.\n"
    );
    let (code, out, err) = run(d, &["search", "nowhere"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("nothing found"), "{err}");
    // The limit.
    assert_eq!(search(d, "thread", &["-n", "1"]).0.len(), 1);
}

#[test]
fn a_query_it_cannot_run_gets_a_clear_error_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create(d, "/memories/a.md", "alpha\n");
    let long = "w ".repeat(600);
    let many = "w ".repeat(33);
    for (query, says) in [
        ("\"open", "quote at character 1 is not closed"),
        ("-alpha", "only leaves out"),
        ("a*", "at least two"),
        ("!!!", "no word to search for"),
        (long.as_str(), "too long (1200 bytes; at most 1024)"),
        (many.as_str(), "too many terms"),
        ("path:a path:b alpha", "one `path:`"),
    ] {
        let (code, out, err) = run(d, &["search", "--", query]);
        assert_eq!(code, 2, "{query:?}: {out} {err}");
        assert!(err.contains(says), "{query:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, _, err) = run(d, &["search", "alpha", "--path", "x", "path:y"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("given twice"), "{err}");
    // An index that cannot be kept is no index: the search says so.
    let (code, _, err) = run(d, &["--no-search", "search", "alpha"]);
    assert_eq!(code, 2);
    assert!(err.contains("--no-search"), "{err}");
}

#[test]
fn the_index_follows_every_change_and_is_rebuilt_when_lost_or_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    seed(d);
    assert_eq!(found(d, "tabs"), ["/memories/user_prefs.md"]);
    tool(
        d,
        json!({"command": "str_replace", "path": "/memories/user_prefs.md", "old_str": "tabs", "new_str": "semicolons"}),
    );
    assert!(found(d, "tabs").is_empty());
    assert_eq!(found(d, "semicolons"), ["/memories/user_prefs.md"]);
    tool(
        d,
        json!({"command": "rename", "old_path": "/memories/notes", "new_path": "/memories/archive"}),
    );
    assert_eq!(found(d, "parse_http_reply"), ["/memories/archive/http.md"]);
    tool(d, json!({"command": "delete", "path": "/memories/archive"}));
    assert!(found(d, "parse_http_reply").is_empty());
    assert!(found(d, "draft").is_empty());
    tool(
        d,
        json!({"command": "insert", "path": "/memories/code/maps.rs", "insert_line": 0, "insert_text": "// quokka\n"}),
    );
    assert_eq!(found(d, "quokka"), ["/memories/code/maps.rs"]);

    let index = d.join(".memfs/search");
    let each_way: [(&str, &dyn Fn()); 3] = [
        ("lost", &|| fs::remove_dir_all(&index).unwrap()),
        ("damaged", &|| {
            fs::write(index.join("meta.json"), b"{not json").unwrap()
        }),
        ("made by another analyzer", &|| {
            fs::write(index.join("memfs-search.json"), b"{\"analyzer\": 0}\n").unwrap()
        }),
    ];
    for (how, break_it) in each_way {
        break_it();
        assert_eq!(found(d, "quokka"), ["/memories/code/maps.rs"], "{how}");
        assert_eq!(found(d, "semicolons"), ["/memories/user_prefs.md"], "{how}");
        assert!(found(d, "parse_http_reply").is_empty(), "{how}");
    }
}

#[test]
fn a_redacted_content_leaves_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // One owner throughout (a CLI alone would open the index afresh, and
    // a first look purges deleted documents anyway).
    let _owner = Server::start(d, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(d.join(".memfs/sock")).is_err() {
        assert!(Instant::now() < deadline, "the owner did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    create(d, "/memories/keep.md", "kept words\n");
    create(d, "/memories/oops.md", "the password is zqxcanary\n");
    assert_eq!(found(d, "zqxcanary"), ["/memories/oops.md"]);
    tool(d, json!({"command": "delete", "path": "/memories/oops.md"}));
    assert!(found(d, "zqxcanary").is_empty());
    let holds = |word: &str| {
        memfs::search::Index::open(&d.join(".memfs/search"))
            .unwrap()
            .holds_word(word)
            .unwrap()
    };
    // Deleted, the document's words are still in the index's files...
    assert!(holds("zqxcanary"));
    let (code, out, err) = run(d, &["log", "--json", "/memories/oops.md"]);
    assert_eq!(code, 0, "{err}");
    let created = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["op"] == "create")
        .unwrap();
    let version = created["version"].as_str().unwrap().to_string();
    let (code, _, err) = run(d, &["redact", &version]);
    assert_eq!(code, 0, "{err}");
    // ...until the redaction, which rewrites the index without them before
    // it answers (not at the index's next look: once, a data dir searched
    // right after a redaction still held the erased name).
    assert!(!holds("zqxcanary"));
    assert!(holds("kept"));
    assert_eq!(found(d, "kept"), ["/memories/keep.md"]);
}

/// The same through the memory stores API of `serve --http`: a version
/// redacted there leaves the store's index before the answer (the door
/// purges it as the CLI's redaction does).
#[test]
fn a_version_redacted_through_the_http_door_leaves_the_index() {
    let root = tempfile::tempdir().unwrap();
    let token = admin_token(root.path());
    let (mut server, addr) = http_server(root.path(), &[]);
    let call = |method: &str, path: &str, body: Value| {
        let (status, text) = http(&addr, method, path, &token, &body.to_string());
        assert_eq!(status, 200, "{method} {path}: {text}");
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let store = call("POST", "/v1/memory_stores", json!({"name": "s"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let api = format!("/v1/memory_stores/{store}");
    let words = json!({"path": "/oops.md", "content": "the password is zqxcanary\n"});
    let memory = call("POST", &format!("{api}/memories"), words)["id"]
        .as_str()
        .unwrap()
        .to_string();
    call(
        "POST",
        &format!("{api}/memories"),
        json!({"path": "/keep.md", "content": "kept\n"}),
    );
    let hits = call("GET", &format!("{api}/search?q=zqxcanary"), json!({}));
    assert_eq!(hits["data"][0]["path"], "/oops.md", "{hits}");
    call("DELETE", &format!("{api}/memories/{memory}"), json!({}));
    let holds = |word: &str| {
        memfs::search::Index::open(&root.path().join(&store).join(".memfs/search"))
            .unwrap()
            .holds_word(word)
            .unwrap()
    };
    assert!(
        holds("zqxcanary"),
        "a deleted document's words stay until a purge"
    );
    let versions = call(
        "GET",
        &format!("{api}/memory_versions?memory_id={memory}"),
        json!({}),
    );
    let created = versions["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["operation"] == "created")
        .unwrap_or_else(|| panic!("no created version: {versions}"));
    let id = created["id"].as_str().unwrap();
    let redacted = call(
        "POST",
        &format!("{api}/memory_versions/{id}/redact"),
        json!({}),
    );
    assert!(redacted["redacted_at"].is_string(), "{redacted}");
    assert!(
        !holds("zqxcanary"),
        "the redaction purged the index before it answered"
    );
    assert!(holds("kept"));
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn hidden_names_and_scratch_files_stay_out_unless_all() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    create(d, "/memories/.private/plan.md", "wombat plan\n");
    create(d, "/memories/visible.md", "wombat notes\n");
    create(d, "/memories/visible.md~", "wombat backup\n");
    assert_eq!(found(d, "wombat"), ["/memories/visible.md"]);
    let (mut all, _) = search(d, "wombat", &["--all"]);
    all.sort();
    assert_eq!(
        all,
        [
            "/memories/.private/plan.md",
            "/memories/visible.md",
            "/memories/visible.md~"
        ]
    );
}

/// The index's documents, read from its files while the owner runs.
fn indexed(dir: &Path) -> Vec<String> {
    memfs::search::Index::open(&dir.join(".memfs/search"))
        .map(|i| i.docs().keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn a_person_s_save_through_the_mount_is_found_and_indexed_without_a_search() {
    if skip_without_fuse("a_person_s_save_through_the_mount_is_found_and_indexed_without_a_search")
    {
        return;
    }
    let m = Mounted::start(&[]);
    let d = m.data.path();
    m.tool(r#"{"command":"create","path":"/memories/agent.md","file_text":"the agent wrote capybara\n"}"#);
    fs::create_dir(m.at("people")).unwrap();
    fs::write(
        m.at("people/note.md"),
        "a person wrote capybara and axolotl\n",
    )
    .unwrap();
    // Nobody searches: the owner's index follows the journal by itself.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !indexed(d).contains(&"people/note.md".to_string()) {
        assert!(Instant::now() < deadline, "never indexed: {:?}", indexed(d));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(indexed(d).contains(&"agent.md".to_string()));
    // `memfs search` beside the owner asks it.
    let mut both = found(d, "capybara");
    both.sort();
    assert_eq!(both, ["/memories/agent.md", "/memories/people/note.md"]);
    // A save is found as soon as the write returned.
    fs::write(m.at("people/note.md"), "now only a pangolin\n").unwrap();
    assert_eq!(found(d, "pangolin"), ["/memories/people/note.md"]);
    assert!(found(d, "axolotl").is_empty());
}

/// Thousands of edits under a running owner: the index follows them with
/// its memory level (its writer's buffers are a fixed cost, taken in the
/// first half) and its files few (small segments are merged).
/// `MEMFS_SOAK_EDITS` runs it longer.
#[test]
fn the_index_s_memory_and_files_stay_bounded_under_thousands_of_edits() {
    let edits: usize = std::env::var("MEMFS_SOAK_EDITS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8000);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut s = Server::start(d, &["--history-keep", "64K"]);
    for i in 0..20 {
        s.call(&format!(
            r#"{{"command":"create","path":"/memories/f{i}.md","file_text":"v0 {}\n"}}"#,
            "x".repeat(200)
        ));
    }
    let mut last = [0usize; 20];
    let mut rss_half = 0;
    let mut most_files = 0;
    for n in 1..=edits {
        let i = n % 20;
        let v = s.call(&format!(
            r#"{{"command":"str_replace","path":"/memories/f{i}.md","old_str":"v{} ","new_str":"v{n} "}}"#,
            last[i]
        ));
        assert_eq!(v["is_error"], false, "{v}");
        last[i] = n;
        if n % 500 == 0 {
            if let Ok(entries) = fs::read_dir(d.join(".memfs/search")) {
                most_files = most_files.max(entries.count());
            }
        }
        if n == edits / 2 {
            rss_half = rss_kib(s.child.id());
        }
    }
    // (Measured before the searches below, which add a thread of their
    // own to the process.)
    let rss_end = rss_kib(s.child.id());
    // Found as it is now, and not as it was.
    let now = format!("v{}", last[7]);
    assert_eq!(found(d, &now), ["/memories/f7.md"]);
    assert!(found(d, "v1").is_empty());
    assert!(s.finish().success());
    assert!(
        rss_end < rss_half + 8 * 1024,
        "memory grew from {rss_half} KiB to {rss_end} KiB"
    );
    // Nine segments of seven files at most, and the stamps.
    assert!(most_files <= 70, "{most_files} files in the index");
}

/// The maps the process holds of its index's files (`/proc/PID/maps`).
fn index_maps(pid: u32) -> usize {
    fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("/.memfs/search/"))
        .count()
}

/// An index nobody searches or writes closes (its readers' maps go), and
/// opens again for the next change and for the next search (issue 54):
/// under a running owner whose indexes close after 300 ms idle.
#[test]
fn an_idle_index_closes_and_opens_again_for_a_change_or_a_search() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut s = Server::start_with_env(d, &[], &[("MEMFS_SEARCH_IDLE_MS", "300")]);
    let pid = s.child.id();
    s.call(r#"{"command":"create","path":"/memories/a.md","file_text":"an okapi\n"}"#);
    assert_eq!(found(d, "okapi"), ["/memories/a.md"]);
    assert!(index_maps(pid) > 0, "the index is open after a search");
    let closed = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while index_maps(pid) > 0 {
            assert!(Instant::now() < deadline, "the index never closed {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    closed("after the search");
    // A change opens it (the owner's look indexes it with nobody searching).
    s.call(r#"{"command":"create","path":"/memories/b.md","file_text":"a quokka\n"}"#);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !indexed(d).contains(&"b.md".to_string()) {
        assert!(Instant::now() < deadline, "never indexed: {:?}", indexed(d));
        std::thread::sleep(Duration::from_millis(20));
    }
    closed("after the change");
    // A search opens it, and finds what it held before it closed.
    assert_eq!(found(d, "okapi"), ["/memories/a.md"]);
    assert_eq!(found(d, "quokka"), ["/memories/b.md"]);
    assert!(s.finish().success());
}

/// `memory_search` through `memfs mcp --search-tool`: text and errors as
/// MCP tool results, names the tool hides left out; without the flag the
/// tool list is the memory tool alone, and with it that tool is unchanged.
#[test]
fn mcp_hosts_that_ask_get_a_search_tool_beside_an_unchanged_memory_tool() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    seed(d);
    create(d, "/memories/private-plan.md", "thread of a secret plan\n");
    let plain = {
        let mut mcp = Mcp::start(d, "plain");
        let list = mcp.request("tools/list", json!({}));
        let call = mcp.request(
            "tools/call",
            json!({"name": "memory_search", "arguments": {"query": "thread"}}),
        );
        assert!(mcp.finish().success());
        assert!(
            call["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Unknown tool"),
            "{call}"
        );
        list["result"]["tools"].clone()
    };
    assert_eq!(plain.as_array().unwrap().len(), 1);
    assert_eq!(plain[0]["name"], "memory");

    let mut mcp = Mcp::start_with(d, "finder", &["--search-tool", "--hide", "private-*"]);
    let tools = mcp.request("tools/list", json!({}))["result"]["tools"].clone();
    assert_eq!(
        tools[0], plain[0],
        "the memory tool is the same with the flag"
    );
    assert_eq!(tools[1]["name"], "memory_search");
    assert_eq!(tools[1]["annotations"]["readOnlyHint"], true);
    let search = |mcp: &mut Mcp, arguments: Value| -> (String, bool) {
        let answer = mcp.request(
            "tools/call",
            json!({"name": "memory_search", "arguments": arguments}),
        );
        let result = &answer["result"];
        (
            result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            result["isError"]
                .as_bool()
                .unwrap_or_else(|| panic!("{answer}")),
        )
    };
    let (text, is_error) = search(&mut mcp, json!({"query": "parse_http_reply"}));
    assert!(!is_error);
    assert_eq!(
        text,
        "/memories/notes/http.md:2: We call parse_http_reply on each answer.\n"
    );
    // What the tool hides (--hide) stays hidden from the agent's search.
    let (text, _) = search(&mut mcp, json!({"query": "thread", "limit": 10}));
    assert!(text.contains("/memories/notes/http.md"), "{text}");
    assert!(!text.contains("private-plan"), "{text}");
    let (text, is_error) = search(
        &mut mcp,
        json!({"query": "thread", "path": "/memories/notes/draft.md"}),
    );
    assert!(!is_error);
    assert!(text.starts_with("/memories/notes/draft.md:1:"), "{text}");
    let (text, is_error) = search(&mut mcp, json!({"query": "nowhere"}));
    assert!(!is_error);
    assert!(text.contains("No file in /memories matches"), "{text}");
    let (text, is_error) = search(&mut mcp, json!({"query": "\"open"}));
    assert!(is_error);
    assert!(text.contains("not closed"), "{text}");
    for bad in [
        json!({}),
        json!({"query": 3}),
        json!({"query": "x", "limit": 0}),
        json!({"query": "x", "path": 1}),
    ] {
        let answer = mcp.request(
            "tools/call",
            json!({"name": "memory_search", "arguments": bad}),
        );
        assert_eq!(answer["error"]["code"], -32602, "{bad}: {answer}");
    }
    // A write through the memory tool is found by the next search.
    let (_, is_error) =
        mcp.tool(json!({"command": "create", "path": "/memories/new.md", "file_text": "ocelot\n"}));
    assert!(!is_error);
    assert_eq!(
        search(&mut mcp, json!({"query": "ocelot"})).0,
        "/memories/new.md:1: ocelot\n"
    );
    assert!(mcp.finish().success());

    // Attached to a running owner: the owner answers, with the tool's hiding.
    let _owner = Server::start(d, &["--hide", "private-*"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(d.join(".memfs/sock")).is_err() {
        assert!(Instant::now() < deadline, "the owner did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut mcp = Mcp::start_with(d, "attached", &["--search-tool", "--hide", "private-*"]);
    let (text, is_error) = search(&mut mcp, json!({"query": "thread secret"}));
    assert!(!is_error);
    assert!(text.contains("No file in /memories matches"), "{text}");
    let (text, _) = search(&mut mcp, json!({"query": "ocelot"}));
    assert_eq!(text, "/memories/new.md:1: ocelot\n");
    assert!(mcp.finish().success());
}

/// The index's errors say their cause (issue 49, item 5): none there, made
/// by another version, damaged, and a full disk, which a caller must not
/// answer by building the index again.
#[test]
fn the_index_tells_a_missing_a_stale_a_damaged_index_and_a_full_disk_apart() {
    use memfs::search::{Index, IndexError};
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("search");
    assert!(matches!(Index::open(&at), Err(IndexError::Missing(_))));
    let put = |n: usize| memfs::search::index::Put {
        path: format!("n{n}.md"),
        sha: format!("{n:064}"),
        text: Some(format!("note {n} about an okapi\n")),
    };
    drop(Index::build(&at, vec![put(1)], 100).unwrap());
    assert!(Index::open(&at).is_ok());
    fs::write(at.join("memfs-search.json"), "{\"analyzer\": 0}\n").unwrap();
    assert!(matches!(Index::open(&at), Err(IndexError::OtherVersion)));
    let damaged = dir.path().join("damaged");
    drop(Index::build(&damaged, vec![put(2)], 100).unwrap());
    fs::write(damaged.join("meta.json"), "{ not json").unwrap();
    let e = Index::open(&damaged).err().expect("a damaged index");
    assert!(matches!(e, IndexError::Engine { .. }), "{e}");
    assert!(!e.disk_full());
    // Built again when missing, stale or damaged; not when the failure may
    // pass (a build would throw the index there away).
    assert!(!e.passing());
    assert!(!IndexError::OtherVersion.passing());
    let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
    assert!(!IndexError::Missing(missing).passing());
    let no_fd = std::io::Error::from_raw_os_error(24);
    assert!(IndexError::Missing(no_fd).passing());
    if !can_mount()
        && skip(
            "the_index_tells_a_missing_a_stale_a_damaged_index_and_a_full_disk_apart (its full disk)",
            "it needs root to mount a tmpfs",
        )
    {
        return;
    }
    let small = Tmpfs::mount("256k");
    fs::write(small.path().join("filler"), vec![0u8; 250 * 1024]).ok();
    let many: Vec<_> = (0..2000).map(put).collect();
    let e = Index::build(&small.path().join("search"), many, 1 << 20)
        .err()
        .expect("a full disk");
    assert!(e.disk_full(), "{e:?}");
}
