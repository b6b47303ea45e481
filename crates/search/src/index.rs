//! The full-text index of one memory, in tantivy: one document per live
//! file (its path, the sha256 of the content indexed, the analyzed path,
//! body and identifiers). Contents are not stored: snippets are cut from
//! the live file. The index knows which content it holds of each path, so
//! that bringing it up to date is a comparison with the tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::indexer::NoMergePolicy;
use tantivy::query::{
    BooleanQuery, BoostQuery, Occur, PhrasePrefixQuery, PhraseQuery, Query as Engine, TermQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use tantivy::{DocAddress, Index as Tantivy, IndexReader, IndexWriter, ReloadPolicy, Term};

use super::analyze;
use super::error::{disk, engine, IndexError};
use super::query::{Clause, Query};

type Doc = tantivy::TantivyDocument;

/// The file beside tantivy's that says which analyzer made the index.
const STAMP: &str = "memfs-search.json";

/// A prefix matches at most this many words of the index.
const PREFIX_EXPANSIONS: u32 = 2000;

/// Decompressed blocks of stored fields a reader keeps per segment
/// (tantivy's default is 100, 1.6 MiB a segment once filled): a document
/// is read for its path and sha only, a few a search.
const DOCSTORE_CACHE_BLOCKS: usize = 4;

/// The analyzer as a tantivy tokenizer: the body's parts, or the whole
/// identifiers.
#[derive(Clone)]
struct Words {
    idents: bool,
}

/// The tokens left, last first, and the one `advance` moved to.
struct Stream {
    rest: Vec<Token>,
    current: Token,
}

impl TokenStream for Stream {
    fn advance(&mut self) -> bool {
        match self.rest.pop() {
            Some(t) => {
                self.current = t;
                true
            }
            None => false,
        }
    }
    fn token(&self) -> &Token {
        &self.current
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.current
    }
}

impl Tokenizer for Words {
    type TokenStream<'a> = Stream;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> Stream {
        let (body, idents) = analyze::analyze(text);
        let parts = if self.idents { idents } else { body };
        let rest = parts
            .into_iter()
            .rev()
            .map(|p| Token {
                offset_from: p.from,
                offset_to: p.to,
                position: p.position,
                text: p.text,
                position_length: 1,
            })
            .collect();
        Stream {
            rest,
            current: Token::default(),
        }
    }
}

#[derive(Clone, Copy)]
struct Fields {
    path: Field,
    sha: Field,
    path_text: Field,
    body: Field,
    idents: Field,
}

fn schema() -> (Schema, Fields) {
    let mut sb = Schema::builder();
    let positions = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("memfs")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let freqs = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("memfs_idents")
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        path: sb.add_text_field("path", STRING | STORED),
        sha: sb.add_text_field("sha", STRING | STORED),
        path_text: sb.add_text_field("path_text", positions.clone()),
        body: sb.add_text_field("body", positions),
        idents: sb.add_text_field("idents", freqs),
    };
    (sb.build(), fields)
}

/// One document to put: a live file's path (relative, `notes/a.md`), the
/// sha256 of its content, and its text (none: not text, found by path only).
pub struct Put {
    pub path: String,
    pub sha: String,
    pub text: Option<String>,
}

/// A match: the path and the content the index holds of it.
pub struct Found {
    pub path: String,
    pub sha: String,
    pub score: f32,
}

/// Writers kept between commits across the process (each holds three of
/// tantivy's threads: its indexer, segment updater and merger).
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// Past this many writers kept, an index lets its writer go as soon as its
/// commit is done, so a server with many stores written at once does not
/// hold three threads for each (docs/PLAN-SEARCH-MEMORY.md: a writer per
/// batch is the plan).
const MAX_KEPT: usize = 4;

pub struct Index {
    index: Tantivy,
    /// The index's directory, kept to prune its cache of mapped files:
    /// tantivy (0.27) adds an entry for every file it ever maps (each
    /// segment, each merge) and drops the dead ones only when asked
    /// (`get_cache_info`), so a server indexing all day grew by them.
    dir: MmapDirectory,
    reader: IndexReader,
    fields: Fields,
    /// The writer, kept while changes come (its threads and buffers are
    /// not made again for each), and when it was last used.
    writer: Option<(IndexWriter<Doc>, std::time::Instant)>,
    /// Every document's path and sha, as committed.
    docs: BTreeMap<String, String>,
    /// Documents deleted since the index was last purged of them.
    deleted_since_purge: bool,
}

impl Drop for Index {
    fn drop(&mut self) {
        drop(self.take_writer());
    }
}

fn register(index: &Tantivy) {
    index
        .tokenizers()
        .register("memfs", Words { idents: false });
    index
        .tokenizers()
        .register("memfs_idents", Words { idents: true });
}

/// The index as memfs writes and reads it: its analyzers registered, and
/// the stored fields compressed on the indexing thread (tantivy's default
/// starts a thread of its own for each segment written).
fn settle(mut index: Tantivy) -> Tantivy {
    register(&index);
    index.settings_mut().docstore_compress_dedicated_thread = false;
    index
}

/// A reader reloaded by hand (after each commit), with a small cache.
fn reader_of(index: &Tantivy) -> Result<IndexReader, IndexError> {
    index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .doc_store_cache_num_blocks(DOCSTORE_CACHE_BLOCKS)
        .try_into()
        .map_err(engine("read"))
}

fn stamp_text() -> String {
    format!("{{\"analyzer\": {}}}\n", analyze::VERSION)
}

impl Index {
    /// Opens the index in `dir`, if one made by this analyzer is there.
    pub fn open(dir: &Path) -> Result<Index, IndexError> {
        match std::fs::read_to_string(dir.join(STAMP)) {
            Ok(s) if s == stamp_text() => {}
            Ok(_) => return Err(IndexError::OtherVersion),
            Err(e) => return Err(IndexError::Missing(e)),
        }
        let mmap = MmapDirectory::open(dir).map_err(|e| engine("opened")(e.into()))?;
        let index = Tantivy::open(mmap.clone()).map_err(engine("opened"))?;
        let (want, fields) = schema();
        if index.schema() != want {
            return Err(IndexError::OtherVersion);
        }
        let index = settle(index);
        let reader = reader_of(&index)?;
        let mut this = Index {
            index,
            dir: mmap,
            reader,
            fields,
            writer: None,
            docs: BTreeMap::new(),
            deleted_since_purge: false,
        };
        this.docs = this.read_docs()?;
        this.deleted_since_purge = this
            .reader
            .searcher()
            .segment_readers()
            .iter()
            .any(|s| s.num_deleted_docs() > 0);
        Ok(this)
    }

    /// Builds an index of `files` from nothing in `dir` (which must not
    /// exist), with a writer sized for `bytes` of text.
    pub fn build(dir: &Path, files: Vec<Put>, bytes: u64) -> Result<Index, IndexError> {
        std::fs::create_dir(dir).map_err(disk("made"))?;
        let (schema, fields) = schema();
        let mmap = MmapDirectory::open(dir).map_err(|e| engine("made")(e.into()))?;
        let index = settle(
            Tantivy::create(mmap.clone(), schema, tantivy::IndexSettings::default())
                .map_err(engine("made"))?,
        );
        let threads = if bytes > 8 << 20 { 2 } else { 1 };
        let heap = (bytes as usize).clamp(15_000_000 * threads, 50_000_000 * threads);
        let mut writer: IndexWriter<Doc> = index
            .writer_with_num_threads(threads, heap)
            .map_err(engine("written"))?;
        let mut docs = BTreeMap::new();
        for put in files {
            writer
                .add_document(document(&fields, &put))
                .map_err(engine("written"))?;
            docs.insert(put.path, put.sha);
        }
        writer.commit().map_err(engine("written"))?;
        writer.wait_merging_threads().map_err(engine("written"))?;
        std::fs::write(dir.join(STAMP), stamp_text()).map_err(disk("stamped"))?;
        let reader = reader_of(&index)?;
        Ok(Index {
            index,
            dir: mmap,
            reader,
            fields,
            writer: None,
            docs,
            deleted_since_purge: false,
        })
    }

    fn read_docs(&self) -> Result<BTreeMap<String, String>, IndexError> {
        let searcher = self.reader.searcher();
        let mut out = BTreeMap::new();
        for (n, segment) in searcher.segment_readers().iter().enumerate() {
            for id in segment.doc_ids_alive() {
                let doc: Doc = searcher
                    .doc(DocAddress::new(n as u32, id))
                    .map_err(engine("read"))?;
                let get = |f| {
                    doc.get_first(f)
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                };
                if let (Some(path), Some(sha)) = (get(self.fields.path), get(self.fields.sha)) {
                    out.insert(path, sha);
                }
            }
        }
        Ok(out)
    }

    /// Every document's path and the sha256 of the content it holds.
    pub fn docs(&self) -> &BTreeMap<String, String> {
        &self.docs
    }

    /// The writer, made if there is none: one indexing thread, and one
    /// thread that merges segments in the background as tantivy's log
    /// merge policy says (eight of a size become one), so a search never
    /// waits for a merge. (Merging by hand after commits held searches up:
    /// 0.6 s whenever a rebuild's segment was among those merged.)
    fn writer(&mut self) -> Result<&mut IndexWriter<Doc>, IndexError> {
        if self.writer.is_none() {
            let options = tantivy::indexer::IndexWriterOptions::builder()
                .num_worker_threads(1)
                .num_merge_threads(1)
                .memory_budget_per_thread(15_000_000)
                .build();
            let writer: IndexWriter<Doc> = self
                .index
                .writer_with_options(options)
                .map_err(engine("written"))?;
            KEPT.fetch_add(1, Ordering::Relaxed);
            self.writer = Some((writer, std::time::Instant::now()));
        }
        let (writer, used) = self.writer.as_mut().expect("made above");
        *used = std::time::Instant::now();
        Ok(writer)
    }

    /// Lets the writer go once it has not been used for `idle`.
    pub fn drop_idle_writer(&mut self, idle: std::time::Duration) {
        if self
            .writer
            .as_ref()
            .is_some_and(|(_, used)| used.elapsed() >= idle)
        {
            if let Some(writer) = self.take_writer() {
                let _ = writer.wait_merging_threads();
            }
        }
    }

    /// The writer, no longer kept (none if there was none).
    fn take_writer(&mut self) -> Option<IndexWriter<Doc>> {
        let taken = self.writer.take().map(|(writer, _)| writer);
        if taken.is_some() {
            KEPT.fetch_sub(1, Ordering::Relaxed);
        }
        taken
    }

    /// Puts `puts` and removes `removes` in one commit.
    pub fn update(&mut self, puts: Vec<Put>, removes: Vec<String>) -> Result<(), IndexError> {
        if puts.is_empty() && removes.is_empty() {
            return Ok(());
        }
        let result = self.try_update(&puts, &removes);
        if result.is_err() {
            // A writer that failed is not used again (the next update
            // makes a new one from what was committed).
            drop(self.take_writer());
            return result;
        }
        // Past MAX_KEPT writers kept in the process, this one goes now
        // that its commit is done (each holds three threads).
        if KEPT.load(Ordering::Relaxed) > MAX_KEPT {
            if let Some(writer) = self.take_writer() {
                let _ = writer.wait_merging_threads();
            }
        }
        self.deleted_since_purge |=
            !removes.is_empty() || puts.iter().any(|p| self.docs.contains_key(&p.path));
        for path in removes {
            self.docs.remove(&path);
        }
        for put in puts {
            self.docs.insert(put.path, put.sha);
        }
        self.reload()
    }

    /// The reader made to see the last commit, and the directory's cache
    /// of mapped files pruned of the files no segment uses any more.
    fn reload(&mut self) -> Result<(), IndexError> {
        self.reader.reload().map_err(engine("read"))?;
        let _ = self.dir.get_cache_info();
        Ok(())
    }

    fn try_update(&mut self, puts: &[Put], removes: &[String]) -> Result<(), IndexError> {
        let fields = self.fields;
        let replaced: Vec<bool> = puts
            .iter()
            .map(|p| self.docs.contains_key(&p.path))
            .collect();
        let writer = self.writer()?;
        for path in removes {
            writer.delete_term(Term::from_field_text(fields.path, path));
        }
        for (put, replaced) in puts.iter().zip(replaced) {
            if replaced {
                writer.delete_term(Term::from_field_text(fields.path, &put.path));
            }
            writer
                .add_document(document(&fields, put))
                .map_err(engine("written"))?;
        }
        writer.commit().map_err(engine("written"))?;
        Ok(())
    }

    /// Rewrites the index without the documents deleted from it: what a
    /// deleted document held leaves the index's files (after a redaction).
    pub fn purge(&mut self) -> Result<(), IndexError> {
        if !self.deleted_since_purge {
            return Ok(());
        }
        // (The background merges done first: the purge merges everything.)
        if let Some(writer) = self.take_writer() {
            writer.wait_merging_threads().map_err(engine("written"))?;
        }
        let ids = self
            .index
            .searchable_segment_ids()
            .map_err(engine("read"))?;
        let writer = self.writer()?;
        writer.set_merge_policy(Box::new(NoMergePolicy));
        if !ids.is_empty() {
            writer.merge(&ids).wait().map_err(engine("merged"))?;
        }
        writer
            .garbage_collect_files()
            .wait()
            .map_err(engine("cleaned"))?;
        self.deleted_since_purge = false;
        // (The next update makes a writer with the usual policy.)
        if let Some(writer) = self.take_writer() {
            writer.wait_merging_threads().map_err(engine("written"))?;
        }
        self.reload()
    }

    /// The index as it stands now, to search without holding the index
    /// (nor the lock it is kept under).
    pub fn view(&self) -> View {
        View {
            searcher: self.reader.searcher(),
            fields: self.fields,
        }
    }

    /// Whether any segment's dictionary of the body holds `word` (also for
    /// a deleted document, until a purge): what a redaction must leave
    /// behind.
    pub fn holds_word(&self, word: &str) -> Result<bool, IndexError> {
        let searcher = self.reader.searcher();
        for segment in searcher.segment_readers() {
            let words = segment
                .inverted_index(self.fields.body)
                .map_err(engine("read"))?;
            if words
                .terms()
                .get(word.as_bytes())
                .map_err(disk("read"))?
                .is_some()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The bytes the index's files take.
    pub fn bytes(dir: &Path) -> u64 {
        let mut n = 0;
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                n += e.metadata().map_or(0, |m| m.len());
            }
        }
        n
    }
}

fn document(f: &Fields, put: &Put) -> Doc {
    let mut d = Doc::default();
    d.add_text(f.path, &put.path);
    d.add_text(f.sha, &put.sha);
    d.add_text(f.path_text, &put.path);
    d.add_text(f.idents, &put.path);
    if let Some(text) = &put.text {
        d.add_text(f.body, text);
        d.add_text(f.idents, text);
    }
    d
}

/// The index as it stood when [`Index::view`] was called: searched
/// without the lock the index is kept under, so that one long search
/// never holds up another, nor the index's updates.
pub struct View {
    searcher: tantivy::Searcher,
    fields: Fields,
}

impl View {
    fn words(&self, field: Field, parts: &[String]) -> Box<dyn Engine> {
        let terms: Vec<Term> = parts
            .iter()
            .map(|p| Term::from_field_text(field, p))
            .collect();
        match terms.len() {
            1 => Box::new(TermQuery::new(
                terms[0].clone(),
                IndexRecordOption::WithFreqs,
            )),
            _ => Box::new(PhraseQuery::new(terms)),
        }
    }

    fn prefix(&self, field: Field, parts: &[String]) -> Box<dyn Engine> {
        let terms = parts
            .iter()
            .map(|p| Term::from_field_text(field, p))
            .collect();
        let mut q = PhrasePrefixQuery::new(terms);
        q.set_max_expansions(PREFIX_EXPANSIONS);
        Box::new(q)
    }

    /// One clause: the body, the path (weighed double) or, for a word
    /// that is an identifier, the identifier whole (weighed double).
    fn clause(&self, c: &Clause) -> Box<dyn Engine> {
        let f = self.fields;
        let boost = |q: Box<dyn Engine>| -> Box<dyn Engine> { Box::new(BoostQuery::new(q, 2.0)) };
        let any: Vec<(Occur, Box<dyn Engine>)> = match c {
            Clause::Word { parts, ident } => {
                let mut any = vec![
                    (Occur::Should, self.words(f.body, parts)),
                    (Occur::Should, boost(self.words(f.path_text, parts))),
                ];
                if let Some(i) = ident {
                    any.push((
                        Occur::Should,
                        boost(self.words(f.idents, std::slice::from_ref(i))),
                    ));
                }
                any
            }
            Clause::Phrase(parts) => vec![
                (Occur::Should, self.words(f.body, parts)),
                (Occur::Should, boost(self.words(f.path_text, parts))),
            ],
            Clause::Prefix(parts) => vec![
                (Occur::Should, self.prefix(f.body, parts)),
                (Occur::Should, boost(self.prefix(f.path_text, parts))),
            ],
        };
        Box::new(BooleanQuery::new(any))
    }

    /// The best `limit` documents for `query`, best first, among those
    /// found before `until`; and whether the search was cut there.
    pub fn search(
        &self,
        query: &Query,
        limit: usize,
        until: std::time::Instant,
    ) -> Result<(Vec<Found>, bool), IndexError> {
        let mut all: Vec<(Occur, Box<dyn Engine>)> = query
            .must
            .iter()
            .map(|c| (Occur::Must, self.clause(c)))
            .collect();
        all.extend(query.not.iter().map(|c| (Occur::MustNot, self.clause(c))));
        // Below a path: the file itself, or what its directory holds.
        let under = query.under.as_deref().map(|u| u.trim_end_matches('/'));
        if let Some(dir) = under.filter(|d| !d.is_empty()) {
            let path = |t: &str| Term::from_field_text(self.fields.path, t);
            let mut below = PhrasePrefixQuery::new(vec![path(&format!("{dir}/"))]);
            below.set_max_expansions(u32::MAX);
            let either: Vec<(Occur, Box<dyn Engine>)> = vec![
                (
                    Occur::Should,
                    Box::new(TermQuery::new(path(dir), IndexRecordOption::Basic)),
                ),
                (Occur::Should, Box::new(below)),
            ];
            let filter = BoostQuery::new(Box::new(BooleanQuery::new(either)), 0.0);
            all.push((Occur::Must, Box::new(filter)));
        }
        let searcher = &self.searcher;
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let bounded = super::deadline::Deadline {
            inner: Box::new(BooleanQuery::new(all)),
            until,
            cut: cut.clone(),
        };
        let top = searcher
            .search(
                &bounded,
                &TopDocs::with_limit(limit.max(1)).order_by_score(),
            )
            .map_err(engine("searched"))?;
        let mut out = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: Doc = searcher.doc(address).map_err(engine("read"))?;
            let get = |f| {
                doc.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            out.push(Found {
                path: get(self.fields.path),
                sha: get(self.fields.sha),
                score,
            });
        }
        Ok((out, cut.load(std::sync::atomic::Ordering::Relaxed)))
    }
}

/// Where a data dir's index lives (`DIR/.memfs/search`), and where a
/// rebuild makes the new one before it takes its place.
pub fn dirs(state_dir: &Path) -> (PathBuf, PathBuf) {
    (state_dir.join("search"), state_dir.join("search.new"))
}
