//! Catalog statistics (`toolrouter catalog stats`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::schema::declared_types;
use super::{Catalog, LoadReport, ParamLocation};

/// Counts of tools and APIs in one group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub(crate) tools: usize,
    pub(crate) apis: usize,
}

/// What a catalog holds, plus what loading it found.
#[derive(Debug, Clone, Serialize)]
pub struct CatalogStats {
    pub tools: usize,
    pub apis: usize,
    pub categories: BTreeMap<String, Counts>,
    /// By source format (`tool_bench`, `open_api`, …).
    pub origins: BTreeMap<String, Counts>,
    pub params: usize,
    pub required_params: usize,
    /// Parameters by JSON Schema type.
    pub param_types: BTreeMap<String, usize>,
    pub path_params: usize,
    /// APIs with a URL (the others are known by their schema only).
    pub apis_with_url: usize,
    /// Tools with RapidAPI statistics (availability priors).
    pub tools_with_score: usize,
    #[serde(flatten)]
    pub load: LoadReport,
}

impl Catalog {
    /// Counts everything; linear in the catalog's size.
    pub fn stats(&self) -> CatalogStats {
        let mut stats = CatalogStats {
            tools: self.tools().len(),
            apis: self.apis().len(),
            categories: BTreeMap::new(),
            origins: BTreeMap::new(),
            params: 0,
            required_params: 0,
            param_types: BTreeMap::new(),
            path_params: 0,
            apis_with_url: 0,
            tools_with_score: self.tools().iter().filter(|t| t.score.is_some()).count(),
            load: self.report().clone(),
        };
        for tool in self.tools() {
            stats.categories.entry(tool.category.clone()).or_default().tools += 1;
            stats.origins.entry(origin_name(tool.origin)).or_default().tools += 1;
        }
        for api in self.apis() {
            let tool = self.tool_of(api);
            stats.categories.entry(tool.category.clone()).or_default().apis += 1;
            stats.origins.entry(origin_name(tool.origin)).or_default().apis += 1;
            stats.apis_with_url += usize::from(api.url_template.is_some());
            for p in &api.params {
                stats.params += 1;
                stats.required_params += usize::from(p.required);
                stats.path_params += usize::from(p.location == ParamLocation::Path);
                let ty = declared_types(&p.schema).first().map_or("any", |t| t.as_str());
                *stats.param_types.entry(ty.to_string()).or_default() += 1;
            }
        }
        stats
    }
}

fn origin_name(origin: super::Origin) -> String {
    serde_json::to_value(origin).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}
