//! A torn tail on the in-memory disk: the power goes while a frame is
//! written and only some of its pages reach the disk. memfs opens on
//! it, drops the torn frame, keeps every acknowledged one, and appends
//! again after the last whole frame.
use memfs::path::MemPath;
use memfs::persist::storage::mem::MemDisk;
use memfs::{Memory, Options};
use serde_json::json;
use std::sync::Arc;

fn create(memory: &Memory, path: &str, text: &str) -> bool {
    let input = json!({"command": "create", "path": path, "file_text": text});
    !memory.tool().call(&input).is_error
}

/// The sha256 of `path`'s newest version, if it has one.
fn newest(memory: &Memory, path: &str) -> Option<String> {
    let rows = memory
        .history()
        .log(&MemPath::parse(path).unwrap())
        .unwrap();
    rows.first().and_then(|r| r.sha256.clone())
}

fn sha(text: &str) -> Option<String> {
    Some(memfs::digest::sha256_hex(text.as_bytes()))
}

/// Whether the journal's last segment is longer than its last whole frame.
fn torn(disk: &Arc<MemDisk>) -> bool {
    memfs::journal::tail_is_torn(&disk.root()).unwrap()
}

/// One power cut `cut` steps into the big write; whether it tore the tail.
fn cut_in_the_big_write(seed: u64, cut: u64, big: &str) -> bool {
    let disk = MemDisk::new(seed);
    let state = tempfile::tempdir().unwrap();
    let open = || Memory::open_on(state.path(), Options::default(), Some(disk.root()));
    {
        let memory = open().unwrap();
        assert!(create(&memory, "/memories/acked.md", "kept\n"));
        // The plain files written out now, so that the checkpointer's own
        // steps (200 ms after the create, or later on a loaded machine)
        // cannot fall among the big write's and take the cut instead: the
        // cut lands on the same step of the same write in every run.
        memory.history().checkpoint().unwrap();
        disk.cut_after(cut);
        create(&memory, "/memories/big.md", big);
        disk.cut_now();
    }
    disk.restart();
    let was_torn = torn(&disk);
    {
        let memory = open().unwrap_or_else(|e| {
            panic!(
                "memfs does not open (seed {seed}, cut {cut}): {e}\n{}",
                disk.dump()
            )
        });
        let at = || format!("(seed {seed}, cut {cut})\n{}", disk.dump());
        assert_eq!(
            newest(&memory, "/memories/acked.md"),
            sha("kept\n"),
            "{}",
            at()
        );
        let big_now = newest(&memory, "/memories/big.md");
        assert!(
            big_now.is_none() || big_now == sha(big),
            "all or nothing {}",
            at()
        );
        assert!(
            create(&memory, "/memories/after.md", "after the cut\n"),
            "{}",
            at()
        );
    }
    // A clean stop: what went in after the cut is there on the next open.
    disk.restart();
    let at = || format!("(seed {seed}, cut {cut})\n{}", disk.dump());
    assert!(
        !torn(&disk),
        "the next append went after the last whole frame {}",
        at()
    );
    let memory = open().unwrap_or_else(|e| panic!("{e} {}", at()));
    assert_eq!(
        newest(&memory, "/memories/after.md"),
        sha("after the cut\n"),
        "{}",
        at()
    );
    assert_eq!(
        newest(&memory, "/memories/acked.md"),
        sha("kept\n"),
        "{}",
        at()
    );
    was_torn
}

#[test]
fn a_torn_tail_is_dropped_and_the_next_append_follows_the_last_whole_frame() {
    // Several pages, so that a restart can keep some and not others.
    let big: String = (0..600)
        .map(|i| format!("line {i} of a big file\n"))
        .collect();
    assert!(big.len() > 3 * 4096);
    let mut cases = 0;
    let mut torn_cases = 0;
    // The steps of the big write: its frame's write, then its sync (a
    // cut there loses what the restart's seed does not keep), then more.
    for seed in 0..32 {
        for cut in 0..4 {
            cases += 1;
            torn_cases += usize::from(cut_in_the_big_write(seed, cut, &big));
        }
    }
    assert!(
        torn_cases > 0,
        "none of {cases} cuts left a torn tail: the test proves nothing"
    );
}
