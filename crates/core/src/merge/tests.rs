use proptest::prelude::*;

use super::{three_way, Merged};

fn merged(base: &str, ours: &str, theirs: &str) -> Merged {
    three_way(base.as_bytes(), ours.as_bytes(), theirs.as_bytes())
}

fn clean(text: &str) -> Merged {
    Merged::Clean(text.as_bytes().to_vec())
}

#[test]
fn one_side_changed_takes_it() {
    let base = "a\nb\nc\n";
    assert_eq!(merged(base, base, "a\nB\nc\n"), clean("a\nB\nc\n"));
    assert_eq!(merged(base, "a\nB\nc\n", base), clean("a\nB\nc\n"));
    assert_eq!(merged(base, "", base), clean(""));
}

#[test]
fn two_appends_keep_both_theirs_first() {
    let base = "# Memory\n- one\n";
    assert_eq!(
        merged(
            base,
            "# Memory\n- one\n- mine\n",
            "# Memory\n- one\n- yours\n"
        ),
        clean("# Memory\n- one\n- yours\n- mine\n")
    );
}

#[test]
fn non_overlapping_edits_keep_both() {
    let base = "1\n2\n3\n4\n5\n6\n";
    assert_eq!(
        merged(base, "1\nTWO\n3\n4\n5\n6\n", "1\n2\n3\n4\nFIVE\n6\nseven\n"),
        clean("1\nTWO\n3\n4\nFIVE\n6\nseven\n")
    );
    // A deletion on one side and an edit elsewhere on the other.
    assert_eq!(
        merged(base, "1\n3\n4\n5\n6\n", "1\n2\n3\n4\n5\nsix\n"),
        clean("1\n3\n4\n5\nsix\n")
    );
}

#[test]
fn edits_of_adjacent_lines_keep_both() {
    // They share no line of the base, so their order is the base's.
    assert_eq!(
        merged("a\nb\nc\nd\n", "a\nB\nc\nd\n", "a\nb\nC\nd\n"),
        clean("a\nB\nC\nd\n")
    );
    // An insertion right after a line the other side changed.
    assert_eq!(merged("a\nb\n", "a\nB\n", "a\nb\nc\n"), clean("a\nB\nc\n"));
}

#[test]
fn one_line_changed_two_ways_conflicts() {
    assert_eq!(
        merged("a\nb\nc\n", "a\nmine\nc\n", "a\nyours\nc\n"),
        Merged::Conflict
    );
    // A line deleted on one side and changed on the other.
    assert_eq!(merged("a\nb\nc\n", "a\nc\n", "a\nB\nc\n"), Merged::Conflict);
    // An insertion inside a range the other side rewrote.
    assert_eq!(
        merged("a\nb\nc\nd\n", "a\nb\nnew\nc\nd\n", "a\nX\nY\nd\n"),
        Merged::Conflict
    );
}

#[test]
fn identical_edits_once() {
    // Both made the same change, and each another one elsewhere.
    assert_eq!(
        merged(
            "1\n2\n3\n4\n5\n",
            "one\n2\n3\nsame\n5\n",
            "1\n2\n3\nsame\n5\nsix\n"
        ),
        clean("one\n2\n3\nsame\n5\nsix\n")
    );
    // The same line appended by both, and another change on one side.
    assert_eq!(
        merged("a\nb\n", "A\nb\nx\n", "a\nb\nx\n"),
        clean("A\nb\nx\n")
    );
    // Where one side's insertion is one change with its edit of the line
    // before (a diff cannot cut them), the other's same insertion touches
    // that change and is kept besides: twice, never lost.
    assert_eq!(merged("a\n", "A\nx\n", "a\nx\n"), clean("A\nx\nx\n"));
}

#[test]
fn an_insertion_holding_the_others_is_not_doubled() {
    // A save made in place on a file another writer changed meanwhile: it
    // holds the other's lines, and more.
    let base = "s\n";
    let theirs = "a1\ns\np1\n";
    let ours = "a1\na2\ns\np1\np2\n";
    assert_eq!(merged(base, ours, theirs), clean(ours));
    // Shared lines once, each side's own kept, theirs first.
    assert_eq!(
        merged("h\n", "h\nx\nmine\n", "h\nyours\nx\n"),
        clean("h\nyours\nx\nmine\n")
    );
}

#[test]
fn an_append_to_a_text_with_no_final_newline_is_an_insertion() {
    assert_eq!(
        merged("a\nb", "a\nb\nmine", "a\nb\nyours"),
        clean("a\nb\nyours\nmine")
    );
    // The final newline is merged on its own: added by one side, kept.
    assert_eq!(merged("a\nb", "a\nb\n", "A\nb"), clean("A\nb\n"));
    assert_eq!(merged("", "mine", "yours\n"), clean("yours\nmine"));
}

#[test]
fn bytes_that_are_not_utf8_merge_as_lines() {
    let base = b"\xff\n\xfe\n\xfd\n";
    let ours = b"\xff\nx\xfe\n\xfd\n";
    let theirs = b"\xff\n\xfe\n\xfd\n\x80\n";
    assert_eq!(
        three_way(base, ours, theirs),
        Merged::Clean(b"\xff\nx\xfe\n\xfd\n\x80\n".to_vec())
    );
}

/// What one side does at one place of the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Nobody,
    Ours,
    Theirs,
    Both,
}

fn who() -> impl Strategy<Value = Who> {
    prop_oneof![
        4 => Just(Who::Nobody),
        2 => Just(Who::Ours),
        2 => Just(Who::Theirs),
        1 => Just(Who::Both),
    ]
}

/// A base of `n` distinct lines, what happens to each line (changed or
/// deleted by one side) and at each of the `n + 1` gaps (lines inserted by
/// one side or both); a gap where both insert has no changed line beside it,
/// so that the expected order (theirs, then ours) is the only merge.
fn edits() -> impl Strategy<Value = (Vec<(Who, u8)>, Vec<Who>)> {
    (0usize..12).prop_flat_map(|n| {
        (
            proptest::collection::vec(
                (
                    prop_oneof![Just(Who::Nobody), Just(Who::Ours), Just(Who::Theirs)],
                    0u8..3,
                ),
                n,
            ),
            proptest::collection::vec(who(), n + 1),
        )
            .prop_map(|(mut lines, gaps)| {
                for (g, gap) in gaps.iter().enumerate() {
                    let (before, after) = (g.wrapping_sub(1), g);
                    let side = |i: usize, l: &[(Who, u8)]| l.get(i).map_or(Who::Nobody, |l| l.0);
                    let around = (side(before, &lines), side(after, &lines));
                    // Both sides inserting: nothing changed beside the gap.
                    // One side inserting between two lines the other side
                    // changed: that is one change of the other side's (a
                    // diff cannot cut it), with an insertion inside it.
                    let clear = *gap == Who::Both
                        || (*gap != Who::Nobody && around.0 == around.1 && around.0 != Who::Nobody);
                    if clear {
                        for i in [before, after] {
                            if let Some(line) = lines.get_mut(i) {
                                line.0 = Who::Nobody;
                            }
                        }
                    }
                }
                (lines, gaps)
            })
    })
}

/// The texts of the base, ours and theirs, and the merge expected.
fn texts(lines: &[(Who, u8)], gaps: &[Who]) -> [String; 4] {
    let [mut base, mut ours, mut theirs, mut want] = [(); 4].map(|_| String::new());
    let add = |who: Who, o: &mut String, t: &mut String, w: &mut String, tag: &str| {
        let (mine, yours) = (format!("o{tag}\n"), format!("t{tag}\n"));
        if matches!(who, Who::Theirs | Who::Both) {
            t.push_str(&yours);
            w.push_str(&yours);
        }
        if matches!(who, Who::Ours | Who::Both) {
            o.push_str(&mine);
            w.push_str(&mine);
        }
    };
    for (i, gap) in gaps.iter().enumerate() {
        add(*gap, &mut ours, &mut theirs, &mut want, &format!("gap{i}"));
        let Some((who, how)) = lines.get(i) else {
            break;
        };
        let line = format!("b{i}\n");
        base.push_str(&line);
        // how 0: deleted; 1 or 2: replaced by that many new lines.
        let new: String = (0..*how).map(|k| format!("{who:?}{i}.{k}\n")).collect();
        let (o, t) = match who {
            Who::Ours => (&new, &line),
            Who::Theirs => (&line, &new),
            _ => (&line, &line),
        };
        ours.push_str(o);
        theirs.push_str(t);
        want.push_str(if *who == Who::Nobody { &line } else { &new });
    }
    [base, ours, theirs, want]
}

fn count(text: &[u8], line: &[u8]) -> usize {
    text.split(|b| *b == b'\n').filter(|l| *l == line).count()
}

proptest! {
    #[test]
    fn edits_at_different_places_merge_to_both((lines, gaps) in edits()) {
        let [base, ours, theirs, want] = texts(&lines, &gaps);
        prop_assert_eq!(merged(&base, &ours, &theirs), clean(&want));
    }

    #[test]
    fn merging_with_an_unchanged_side_gives_the_other((lines, gaps) in edits()) {
        let [base, ours, theirs, _] = texts(&lines, &gaps);
        prop_assert_eq!(merged(&base, &base, &theirs), clean(&theirs));
        prop_assert_eq!(merged(&base, &ours, &base), clean(&ours));
        prop_assert_eq!(merged(&base, &ours, &ours), clean(&ours));
    }

    /// One side holds the other's insertions and more of its own (a save
    /// made in place over another writer's change): the merge is that side.
    #[test]
    fn a_side_that_holds_the_others_insertions_is_the_merge(
        base in proptest::collection::vec(0u16..1000, 0..8),
        first in proptest::collection::vec((0usize..9, 1000u16..2000), 0..6),
        more in proptest::collection::vec((0usize..15, 2000u16..3000), 1..6),
    ) {
        let insert = |lines: &[u16], adds: &[(usize, u16)]| {
            let mut out = lines.to_vec();
            for &(at, line) in adds {
                out.insert(at.min(out.len()), line);
            }
            out
        };
        let text = |v: &[u16]| v.iter().map(|n| format!("{n}\n")).collect::<String>();
        let theirs = insert(&base, &first);
        let ours = insert(&theirs, &more);
        let (base, ours, theirs) = (text(&base), text(&ours), text(&theirs));
        prop_assert_eq!(merged(&base, &ours, &theirs), clean(&ours));
    }

    /// Random texts over a few lines, so that the sides collide often: a
    /// clean merge holds every line either side added (as many times as
    /// that side added it).
    #[test]
    fn a_clean_merge_keeps_every_line_each_side_added(
        base in proptest::collection::vec(0u8..4, 0..10),
        ours in proptest::collection::vec(0u8..4, 0..10),
        theirs in proptest::collection::vec(0u8..4, 0..10),
    ) {
        let text = |v: &[u8]| v.iter().map(|n| format!("{n}\n")).collect::<String>();
        let (base, ours, theirs) = (text(&base), text(&ours), text(&theirs));
        if let Merged::Clean(m) = merged(&base, &ours, &theirs) {
            for n in 0..4u8 {
                let line = n.to_string();
                let had = count(base.as_bytes(), line.as_bytes());
                for side in [&ours, &theirs] {
                    let added = count(side.as_bytes(), line.as_bytes()).saturating_sub(had);
                    prop_assert!(
                        count(&m, line.as_bytes()) >= added,
                        "{:?} lost a {} added ({:?} {:?} {:?})",
                        String::from_utf8_lossy(&m), n, base, ours, theirs
                    );
                }
            }
        }
    }
}
