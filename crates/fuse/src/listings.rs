//! Directory listings handed to the kernel, and the offsets that name a
//! place in them.
//!
//! A listing is taken whole when a reader starts at offset 0, and every
//! offset handed out names its listing (its id, in the high bits) and the
//! place in it (the low bits). So a read that goes on at an offset goes on
//! in the same listing, whichever handle it comes through: entries are
//! neither skipped nor repeated while the directory changes. The kernel
//! needs this once it caches listings (`FOPEN_CACHE_DIR`): a reader served
//! from its cache whose cache is then dropped (the directory changed) goes
//! on at its offset through its own handle, which never read a listing
//! from memfs.
//!
//! The newest [`KEPT`] listings are kept, holding at most
//! [`KEPT_ENTRIES`] entries in all (a reader that goes on in one older
//! than that gets a fresh listing from its place on, which is the best
//! that can be done). The bound by entries keeps a few listings of a huge
//! directory from holding gigabytes.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::lock::{rank, Mutex};

/// Listings kept for readers that go on at an offset...
pub const KEPT: usize = 64;
/// ...and the entries they hold in all (the newest listing is kept
/// whatever its size).
pub const KEPT_ENTRIES: usize = 1 << 20;

/// The low bits of an offset: one more than the index of the entry it
/// follows (0 is where every listing starts).
const PLACE_BITS: u32 = 32;
const PLACE_MASK: u64 = (1 << PLACE_BITS) - 1;
/// Ids stay below 2^31, so every offset is a positive `loff_t`.
const ID_MASK: u32 = (1 << 31) - 1;

/// Listings of `T` (a directory entry), by id.
pub struct Listings<T> {
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    last_id: u32,
    kept: VecDeque<(u32, Arc<Vec<T>>)>,
    /// The entries of the listings kept.
    entries: usize,
}

impl<T> Default for Listings<T> {
    fn default() -> Self {
        Listings {
            inner: Mutex::new(
                rank::MOUNT_DIRS,
                Inner {
                    last_id: 0,
                    kept: VecDeque::new(),
                    entries: 0,
                },
            ),
        }
    }
}

/// A listing and where in it a read goes on.
pub struct From<T> {
    pub id: u32,
    pub entries: Arc<Vec<T>>,
    pub index: usize,
}

impl<T> From<T> {
    /// The offset after the entry at `index`.
    pub fn offset_after(&self, index: usize) -> u64 {
        (u64::from(self.id) << PLACE_BITS) | (index as u64 + 1)
    }
}

impl<T> Listings<T> {
    /// Where a read at `offset` goes on: in the listing the offset names,
    /// or (offset 0, or a listing no longer kept) in a fresh one from
    /// `take`, which runs without this map's lock (it takes the store's).
    pub fn at<E>(
        &self,
        offset: u64,
        take: impl FnOnce() -> Result<Vec<T>, E>,
    ) -> Result<From<T>, E> {
        let id = (offset >> PLACE_BITS) as u32;
        let index = (offset & PLACE_MASK) as usize;
        if offset != 0 {
            let inner = self.inner.lock();
            if let Some((_, entries)) = inner.kept.iter().find(|(kept, _)| *kept == id) {
                return Ok(From {
                    id,
                    entries: entries.clone(),
                    index,
                });
            }
        }
        let entries = Arc::new(take()?);
        let mut dropped = Vec::new();
        let mut inner = self.inner.lock();
        inner.last_id = (inner.last_id % ID_MASK) + 1;
        let id = inner.last_id;
        inner.entries += entries.len();
        inner.kept.push_back((id, entries.clone()));
        while inner.kept.len() > KEPT || (inner.entries > KEPT_ENTRIES && inner.kept.len() > 1) {
            if let Some((_, gone)) = inner.kept.pop_front() {
                inner.entries -= gone.len();
                dropped.push(gone);
            }
        }
        drop(inner);
        // (A big listing is freed after the lock is let go.)
        drop(dropped);
        Ok(From { id, entries, index })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(names: &[&'static str]) -> Vec<&'static str> {
        names.to_vec()
    }

    #[test]
    fn an_offset_goes_on_in_its_own_listing_whoever_changed_the_directory() {
        let l = Listings::<&str>::default();
        let first = l.at::<()>(0, || Ok(listing(&["a", "b", "c"]))).unwrap();
        let after_a = first.offset_after(0);
        // The directory changes: a new reader at 0 gets the new listing...
        let second = l
            .at::<()>(0, || Ok(listing(&["0", "a", "b", "c"])))
            .unwrap();
        assert_ne!(second.id, first.id);
        // ...and a reader going on after "a" goes on in the first, with "b".
        let on = l.at::<()>(after_a, || panic!("kept")).unwrap();
        assert_eq!(on.entries[on.index], "b");
        assert_eq!(on.offset_after(on.index), first.offset_after(1));
    }

    #[test]
    fn a_listing_no_longer_kept_is_taken_fresh_from_the_same_place() {
        let l = Listings::<&str>::default();
        let first = l.at::<()>(0, || Ok(listing(&["a", "b"]))).unwrap();
        let after_a = first.offset_after(0);
        for _ in 0..KEPT {
            l.at::<()>(0, || Ok(listing(&["x"]))).unwrap();
        }
        let on = l
            .at::<()>(after_a, || Ok(listing(&["a", "b", "c"])))
            .unwrap();
        assert_ne!(on.id, first.id);
        assert_eq!(on.entries[on.index], "b");
    }

    #[test]
    fn listings_kept_hold_at_most_kept_entries_in_all_but_the_newest_stays() {
        let l = Listings::<u8>::default();
        let big = KEPT_ENTRIES / 3 + 1;
        let ids: Vec<u32> = (0..3)
            .map(|_| l.at::<()>(0, || Ok(vec![0; big])).unwrap().id)
            .collect();
        // Three would be over the bound: the oldest went.
        let kept: Vec<u32> = l.inner.lock().kept.iter().map(|(id, _)| *id).collect();
        assert_eq!(kept, ids[1..]);
        assert_eq!(l.inner.lock().entries, 2 * big);
        // One listing over the bound by itself is kept alone.
        let huge = l.at::<()>(0, || Ok(vec![0; KEPT_ENTRIES + 1])).unwrap();
        let kept: Vec<u32> = l.inner.lock().kept.iter().map(|(id, _)| *id).collect();
        assert_eq!(kept, [huge.id]);
        let on = l.at::<()>(huge.offset_after(5), || panic!("kept")).unwrap();
        assert_eq!(on.index, 6);
    }

    #[test]
    fn offsets_stay_positive_and_ids_never_zero() {
        let l = Listings::<&str>::default();
        l.inner.lock().last_id = ID_MASK - 1;
        let a = l.at::<()>(0, || Ok(listing(&["a"]))).unwrap();
        let b = l.at::<()>(0, || Ok(listing(&["a"]))).unwrap();
        assert_eq!((a.id, b.id), (ID_MASK, 1));
        assert!(a.offset_after(u32::MAX as usize - 1) <= i64::MAX as u64);
        assert_ne!(b.offset_after(0), 0);
    }
}
