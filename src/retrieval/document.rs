//! The text that represents an API for retrieval, and the content hash of
//! a catalog's texts.
//!
//! An API's document leads with what it does (API name and description),
//! then its tool (name, description, category), then its parameter names:
//! many API descriptions are terse or empty, and the tool's text and the
//! parameter names carry the rest (docs/architecture.md §3). The BM25
//! document ([`lexical_document`]) leaves out the tool's description and
//! category, which the tool-level index carries. The catalog hash covers
//! every function name and document, so an index built for other texts is
//! recognised as stale.

use sha2::{Digest, Sha256};

use super::embedder::hex;
use crate::catalog::{Api, Catalog};

/// Bump when the document text changes: every index is then rebuilt.
pub(crate) const DOCUMENT_VERSION: u32 = 3;
/// Longest dense document, in characters (about 64 of the model's tokens).
/// Embedding costs by the token: cut here rather than at the model's 128
/// tokens, the full catalog's documents embed 2.4 times faster, for 0.003
/// less hybrid Recall@10 on the development sets (docs/benchmarks.md,
/// "Building the index"). Its head says what the API does; the rest is
/// mostly the tool's description, shared by all its APIs.
const MAX_DENSE_DOCUMENT: usize = 260;
/// Longest tool description kept in a document, in characters.
const MAX_TOOL_DESCRIPTION: usize = 600;
/// Longest API description kept in a document, in characters.
const MAX_API_DESCRIPTION: usize = 600;
/// Longest parameter description kept in a lexical document, in characters
/// (100 scored best on G1_instruction among 40, 100, 200 and 600).
const MAX_PARAM_DESCRIPTION: usize = 100;

/// What both documents start with: `name: description. Tool tool-name`.
fn head(catalog: &Catalog, api: &Api, capacity: usize) -> String {
    let mut doc = String::with_capacity(capacity);
    doc.push_str(&api.name);
    let description = cut_at_word(&api.description, MAX_API_DESCRIPTION);
    if !description.is_empty() && description != api.name {
        doc.push_str(": ");
        doc.push_str(description);
    }
    doc.push_str(". Tool ");
    doc.push_str(&catalog.tool_of(api).name);
    doc
}

/// The lexical (BM25) document of one API: its name, description, tool
/// name, parameter names and the start of each parameter's description
/// (what an API takes often says what it does when its own description is
/// terse: "ZIP code" takes "the ZIP code to get income data for"). The
/// tool's description is left to the tool-level index: repeated in every
/// API of the tool, it would drown what tells the APIs apart. Parameter
/// defaults are left out: they are sample values, and ToolBench's requests
/// were written from documentation that showed them (see
/// docs/benchmarks.md, "Parameter text in the API documents").
pub(crate) fn lexical_document(catalog: &Catalog, api: &Api) -> String {
    let mut doc = head(catalog, api, 160);
    if !api.params.is_empty() {
        doc.push_str(". Parameters: ");
        let names: Vec<&str> = api.params.iter().map(|p| p.name.as_str()).collect();
        doc.push_str(&names.join(", "));
        for param in &api.params {
            let description = cut_at_word(&param.description, MAX_PARAM_DESCRIPTION);
            if !description.is_empty() {
                doc.push_str(". ");
                doc.push_str(description);
            }
        }
    }
    doc
}

/// The dense (embedded) document of one API.
pub(crate) fn api_document(catalog: &Catalog, api: &Api) -> String {
    let tool = catalog.tool_of(api);
    let mut doc = head(catalog, api, 256);
    let tool_description = cut_at_word(&tool.description, MAX_TOOL_DESCRIPTION);
    if !tool_description.is_empty() {
        doc.push_str(": ");
        doc.push_str(tool_description);
    }
    doc.push_str(". Category ");
    doc.push_str(&tool.category.replace('_', " "));
    if !api.params.is_empty() {
        doc.push_str(". Parameters: ");
        let names: Vec<&str> = api.params.iter().map(|p| p.name.as_str()).collect();
        doc.push_str(&names.join(", "));
    }
    cut_at_word(&doc, MAX_DENSE_DOCUMENT).to_string()
}

/// Every API's dense and lexical documents, indexed by `ApiId`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Documents {
    pub(crate) dense: Vec<String>,
    pub(crate) lexical: Vec<String>,
}

/// Made side by side (47,000 APIs: 100 ms alone, on a changed catalog's path).
pub(crate) fn documents(catalog: &Catalog) -> Documents {
    std::thread::scope(|scope| {
        let dense = scope.spawn(|| catalog.apis().iter().map(|api| api_document(catalog, api)).collect());
        let lexical = catalog.apis().iter().map(|api| lexical_document(catalog, api)).collect();
        Documents { dense: dense.join().expect("making documents does not panic"), lexical }
    })
}

/// SHA-256 (hex) of the document and tokenizer versions, and every function
/// name and document: what an index is built from.
pub(crate) fn catalog_hash(catalog: &Catalog, documents: &Documents) -> String {
    let mut h = Sha256::new();
    h.update(DOCUMENT_VERSION.to_le_bytes());
    h.update(super::bm25::TOKENIZER_VERSION.to_le_bytes());
    for ((api, dense), lexical) in catalog.apis().iter().zip(&documents.dense).zip(&documents.lexical) {
        h.update(api.function_name.as_bytes());
        h.update([0]);
        h.update(dense.as_bytes());
        h.update([0]);
        h.update(lexical.as_bytes());
        h.update([b'\n']);
    }
    hex(&h.finalize())
}

/// The first `max` characters of `text`, trimmed, cut at a word boundary.
fn cut_at_word(text: &str, max: usize) -> &str {
    let text = text.trim();
    match text.char_indices().nth(max) {
        None => text,
        Some((end, _)) => text[..end].rsplit_once(char::is_whitespace).map_or(&text[..end], |(head, _)| head),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Sources;

    #[test]
    fn documents_lead_with_the_api_and_hash_changes_with_them() {
        let catalog = Catalog::load(&Sources::default()).unwrap();
        let docs = documents(&catalog);
        let api = catalog.api(catalog.resolve("latest_rates_for_frankfurter").first().unwrap());
        let doc = &docs.dense[api.id.0 as usize];
        assert_eq!(
            docs.lexical[api.id.0 as usize],
            "latest_rates: Latest exchange rates. Rates of the latest working day, updated around 16:00 CET. Convert an amount by multiplying it with the rate.. Tool Frankfurter. Parameters: base, symbols. \
             Currency to quote against (ISO 4217 code).. Limit the result to these target currencies (ISO 4217 codes), \
             e.g. [\"USD\", \"GBP\"]."
        );
        assert!(doc.starts_with("latest_rates: Latest exchange rates. Rates of the latest working day"), "{doc}");
        assert!(doc.contains(". Tool Frankfurter: Current and historical"), "{doc}");
        assert!(doc.chars().count() <= MAX_DENSE_DOCUMENT, "a dense document is cut to its length: {doc}");
        for api in catalog.apis() {
            let doc = &docs.dense[api.id.0 as usize];
            assert!(doc.chars().count() <= MAX_DENSE_DOCUMENT && doc.starts_with(&api.name), "{doc}");
        }
        let hash = catalog_hash(&catalog, &docs);
        let mut changed = docs.clone();
        changed.lexical[0].push('!');
        assert_ne!(hash, catalog_hash(&catalog, &changed));
        assert_eq!(hash, catalog_hash(&catalog, &documents(&catalog)));
    }

    #[test]
    fn cut_at_word_cuts_at_words() {
        assert_eq!(cut_at_word("  one two three  ", 9), "one two");
        assert_eq!(cut_at_word("short", 10), "short");
    }
}
