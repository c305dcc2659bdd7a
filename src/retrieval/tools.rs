//! Tool-level retrieval: tools ranked by their whole text.
//!
//! A request generated from several APIs of one tool matches that tool's
//! combined text better than any one of its APIs. Each tool gets a
//! document (its name, description, category, and every API's name and
//! description, clipped) indexed with BM25, stored with the rest of the
//! index. (A dense signal per tool, the centroid of its APIs' vectors, was
//! measured too: no better overall, and 2.5x the ranking time.)

use std::collections::HashMap;

use super::bm25::Bm25;
use crate::catalog::Catalog;

/// Longest text of one API kept in its tool's document, in characters.
const API_TEXT: usize = 160;

/// The tool-level BM25 index; document `i` is tool `i`.
pub(crate) fn tool_bm25(catalog: &Catalog) -> Bm25 {
    Bm25::build(&tool_documents(catalog))
}

/// Every tool's document; document `i` is tool `i`'s.
pub(crate) fn tool_documents(catalog: &Catalog) -> Vec<String> {
    let all: Vec<Option<()>> = vec![None; catalog.tools().len()];
    let mut docs = tool_documents_of(catalog, &all);
    (0..all.len()).map(|t| docs.remove(&t).unwrap_or_default()).collect()
}

/// The documents of the tools `skip` has no entry for (`None`), by tool.
pub(crate) fn tool_documents_of<T>(catalog: &Catalog, skip: &[Option<T>]) -> HashMap<usize, String> {
    let mut docs: HashMap<usize, String> = catalog
        .tools()
        .iter()
        .enumerate()
        .filter(|(t, _)| skip[*t].is_none())
        .map(|(t, tool)| {
            (t, format!("{}: {}. Category {}.", tool.name, tool.description, tool.category.replace('_', " ")))
        })
        .collect();
    for api in catalog.apis() {
        if let Some(doc) = docs.get_mut(&(api.tool.0 as usize)) {
            let text: String = format!(" {}: {}.", api.name, api.description).chars().take(API_TEXT).collect();
            doc.push_str(&text);
        }
    }
    docs
}
