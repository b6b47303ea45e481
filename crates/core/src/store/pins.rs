//! The kernel's references on inodes (lookups and open handles), counted
//! so that an orphan (a node with no name left) lives while the kernel
//! holds it and goes when the last reference does. Taken after the tree
//! lock, never before it (docs/DESIGN.md, "Lock order").

use super::tree::Ino;
use super::Store;

impl Store {
    /// The kernel took `n` more references on `ino` (lookups, open handles).
    pub fn pin(&self, ino: Ino, n: u64) {
        if n > 0 {
            *self.pins.lock().entry(ino).or_insert(0) += n;
        }
    }

    /// The kernel took one more reference on each of `inos` (the entries of
    /// a `readdirplus` reply): one lock for all of them.
    pub fn pin_each(&self, inos: &[Ino]) {
        if inos.is_empty() {
            return;
        }
        let mut pins = self.pins.lock();
        for &ino in inos {
            *pins.entry(ino).or_insert(0) += 1;
        }
    }

    /// The kernel dropped `n` references; an orphan nobody holds is dropped.
    pub fn unpin(&self, ino: Ino, n: u64) {
        let released = {
            let mut pins = self.pins.lock();
            match pins.get_mut(&ino) {
                Some(count) if *count > n => {
                    *count -= n;
                    false
                }
                Some(_) => {
                    pins.remove(&ino);
                    true
                }
                None => false,
            }
        };
        if released {
            let mut tree = self.tree.write();
            let pins = self.pins.lock();
            tree.drop_if_unused(ino, &|i| pins.contains_key(&i));
        }
    }

    /// Forgets every kernel reference (the mount is gone) and drops orphans.
    pub fn unpin_all(&self) {
        let inos: Vec<Ino> = self.pins.lock().drain().map(|(ino, _)| ino).collect();
        let mut tree = self.tree.write();
        for ino in inos {
            tree.drop_if_unused(ino, &|_| false);
        }
    }
}
