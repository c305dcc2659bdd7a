//! Tool-level retrieval: tools ranked by their whole text.
//!
//! A request generated from several APIs of one tool matches that tool's
//! combined text better than any one of its APIs. Each tool gets a
//! document (its name, description, category, and every API's name and
//! description, clipped) indexed with BM25, stored with the rest of the
//! index. (A dense signal per tool, the centroid of its APIs' vectors, was
//! measured too: no better overall, and 2.5x the ranking time.)

use super::bm25::Bm25;
use crate::catalog::Catalog;

/// Longest text of one API kept in its tool's document, in characters.
const API_TEXT: usize = 160;

/// The tool-level BM25 index; document `i` is tool `i`.
pub fn tool_bm25(catalog: &Catalog) -> Bm25 {
    let mut docs: Vec<String> = catalog
        .tools()
        .iter()
        .map(|t| format!("{}: {}. Category {}.", t.name, t.description, t.category.replace('_', " ")))
        .collect();
    for api in catalog.apis() {
        let text: String = format!(" {}: {}.", api.name, api.description).chars().take(API_TEXT).collect();
        docs[api.tool.0 as usize].push_str(&text);
    }
    Bm25::build(&docs)
}
