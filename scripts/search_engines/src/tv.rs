//! tantivy behind the spike's `Engine`.

use crate::{analyze, Clause, Engine};
use std::path::Path;
use tantivy::collector::TopDocs;
use tantivy::query::{
    BooleanQuery, BoostQuery, Occur, PhrasePrefixQuery, PhraseQuery, Query, TermQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

#[derive(Clone)]
struct Words {
    idents: bool,
}

struct Stream {
    tokens: Vec<Token>,
    at: usize,
}

impl TokenStream for Stream {
    fn advance(&mut self) -> bool {
        self.at += 1;
        self.at <= self.tokens.len()
    }
    fn token(&self) -> &Token {
        &self.tokens[self.at - 1]
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.at - 1]
    }
}

impl Tokenizer for Words {
    type TokenStream<'a> = Stream;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> Stream {
        let (body, idents) = analyze::analyze(text);
        let parts = if self.idents { idents } else { body };
        let tokens = parts
            .into_iter()
            .map(|p| Token {
                offset_from: p.from,
                offset_to: p.to,
                position: p.position,
                text: p.text,
                position_length: 1,
            })
            .collect();
        Stream { tokens, at: 0 }
    }
}

pub struct Tantivy {
    writer: IndexWriter,
    reader: IndexReader,
    path: Field,
    path_text: Field,
    body: Field,
    idents: Field,
}

impl Tantivy {
    pub fn create(dir: &Path) -> Self {
        let mut sb = Schema::builder();
        let with_positions = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("memfs")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let freqs = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("memfs_idents")
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let path = sb.add_text_field("path", STRING | STORED);
        let path_text = sb.add_text_field("path_text", with_positions.clone());
        let body = sb.add_text_field("body", with_positions);
        let idents = sb.add_text_field("idents", freqs);
        let index = Index::create_in_dir(dir, sb.build()).unwrap();
        index
            .tokenizers()
            .register("memfs", Words { idents: false });
        index
            .tokenizers()
            .register("memfs_idents", Words { idents: true });
        // SPIKE_WRITER="threads,bytes" (default 2 threads, 100 MB in all).
        let (threads, heap) = std::env::var("SPIKE_WRITER")
            .ok()
            .and_then(|v| {
                let (a, b) = v.split_once(',')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .unwrap_or((2, 100_000_000));
        let writer = index.writer_with_num_threads(threads, heap).unwrap();
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .unwrap();
        Tantivy {
            writer,
            reader,
            path,
            path_text,
            body,
            idents,
        }
    }

    fn doc(&self, path: &str, text: &str) -> TantivyDocument {
        let mut d = TantivyDocument::default();
        d.add_text(self.path, path);
        d.add_text(self.path_text, path);
        d.add_text(self.body, text);
        d.add_text(self.idents, text);
        d
    }

    fn words(&self, field: Field, parts: &[String]) -> Box<dyn Query> {
        let terms: Vec<Term> = parts
            .iter()
            .map(|p| Term::from_field_text(field, p))
            .collect();
        if terms.len() == 1 {
            Box::new(TermQuery::new(
                terms[0].clone(),
                IndexRecordOption::WithFreqs,
            ))
        } else {
            Box::new(PhraseQuery::new(terms))
        }
    }

    fn clause(&self, c: &Clause) -> Box<dyn Query> {
        let mut any: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        match c {
            Clause::Word(parts, _) | Clause::Phrase(parts) if !parts.is_empty() => {
                any.push((Occur::Should, self.words(self.body, parts)));
                any.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(self.words(self.path_text, parts), 2.0)),
                ));
                if let Clause::Word(_, Some(i)) = c {
                    let t = Term::from_field_text(self.idents, i);
                    any.push((
                        Occur::Should,
                        Box::new(BoostQuery::new(
                            Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs)),
                            2.0,
                        )),
                    ));
                }
            }
            Clause::Prefix(parts) => {
                for f in [self.body, self.path_text] {
                    let terms = parts.iter().map(|p| Term::from_field_text(f, p)).collect();
                    any.push((Occur::Should, Box::new(PhrasePrefixQuery::new(terms))));
                }
            }
            _ => {}
        }
        Box::new(BooleanQuery::new(any))
    }
}

impl Engine for Tantivy {
    fn add_all(&mut self, docs: &[(String, String)]) {
        for (p, t) in docs {
            self.writer.add_document(self.doc(p, t)).unwrap();
        }
        self.writer.commit().unwrap();
        self.reader.reload().unwrap();
    }

    fn update(&mut self, path: &str, text: &str) {
        self.writer
            .delete_term(Term::from_field_text(self.path, path));
        self.writer.add_document(self.doc(path, text)).unwrap();
        self.writer.commit().unwrap();
        self.reader.reload().unwrap();
    }

    fn search(&mut self, clauses: &[Clause], limit: usize) -> Vec<String> {
        let all: Vec<(Occur, Box<dyn Query>)> = clauses
            .iter()
            .map(|c| (Occur::Must, self.clause(c)))
            .collect();
        let q = BooleanQuery::new(all);
        let searcher = self.reader.searcher();
        let top = searcher
            .search(&q, &TopDocs::with_limit(limit).order_by_score())
            .unwrap();
        top.into_iter()
            .map(|(_, a)| {
                let d: TantivyDocument = searcher.doc(a).unwrap();
                d.get_first(self.path)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    }
}
