//! Finding an API by the names other systems use for it.
//!
//! Trajectories and query files spell API names in several ways (dataset
//! README, "Observed inconsistencies"): ToolBench's raw function name (with
//! CJK or `^`, before de-duplication), the 2023 spelling without `get_` on
//! digit-leading API names, tool names with `/` and `,` deleted instead of
//! replaced, different case, stray spaces. Every such spelling of every API
//! is indexed once at load; a lookup is a hash probe.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::names::{
    deleted_punctuation_variant, legacy_function_name, lookup_key, standardize, standardize_member,
    toolbench_function_name,
};
use super::{Api, ApiId, Tool};

/// Which spelling matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedBy {
    /// The catalog's function name (case and surrounding spaces ignored).
    FunctionName,
    /// A variant spelling (ToolBench raw name, 2023 name, punctuation variant).
    Variant,
}

/// The result of a name lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Exactly one API has this name.
    Unique(ApiId, ResolvedBy),
    /// Several APIs answer to this spelling (ToolBench names shared by
    /// tools of the same name); the catalog's own holder of the name first.
    Ambiguous(Vec<ApiId>, ResolvedBy),
    NotFound,
}

impl Resolution {
    /// The best match: the unique one, or the first of several.
    pub fn first(&self) -> Option<ApiId> {
        match self {
            Resolution::Unique(id, _) => Some(*id),
            Resolution::Ambiguous(ids, _) => ids.first().copied(),
            Resolution::NotFound => None,
        }
    }

    /// Every API that answers to the name.
    pub(crate) fn candidates(&self) -> &[ApiId] {
        match self {
            Resolution::Unique(id, _) => std::slice::from_ref(id),
            Resolution::Ambiguous(ids, _) => ids,
            Resolution::NotFound => &[],
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Resolver {
    exact: HashMap<String, ApiId>,
    variants: HashMap<String, Vec<ApiId>>,
    pairs: HashMap<(String, String), Vec<ApiId>>,
    /// Standardized tool names, with their punctuation variants.
    tools: HashSet<String>,
}

impl Resolver {
    pub(super) fn build(tools: &[Tool], apis: &[Api]) -> Resolver {
        let mut r = Resolver {
            exact: HashMap::with_capacity(apis.len()),
            variants: HashMap::with_capacity(apis.len() / 4),
            pairs: HashMap::with_capacity(apis.len()),
            tools: HashSet::with_capacity(tools.len()),
        };
        for tool in tools {
            r.tools.insert(tool.std_name.clone());
            r.tools.extend(deleted_punctuation_variant(&tool.name));
        }
        for api in apis {
            let tool = &tools[api.tool.0 as usize];
            r.exact.insert(api.function_name.clone(), api.id);
            let std_api = standardize_member(&api.name);
            let mut tool_spellings = vec![tool.std_name.clone()];
            tool_spellings.extend(deleted_punctuation_variant(&tool.name));
            for std_tool in &tool_spellings {
                r.add_variant(lookup_key(&toolbench_function_name(&std_api, std_tool)), api);
                if let Some(legacy) = legacy_function_name(&api.name, std_tool) {
                    r.add_variant(lookup_key(&legacy), api);
                }
            }
            r.pairs.entry((tool.std_name.clone(), std_api)).or_default().push(api.id);
        }
        r
    }

    fn add_variant(&mut self, key: String, api: &Api) {
        let ids = self.variants.entry(key).or_default();
        if !ids.contains(&api.id) {
            ids.push(api.id);
        }
    }

    pub(super) fn resolve(&self, name: &str) -> Resolution {
        let key = lookup_key(name);
        let exact = self.exact.get(&key).copied();
        let mut ids: Vec<ApiId> = exact.into_iter().collect();
        for id in self.variants.get(&key).into_iter().flatten() {
            if !ids.contains(id) {
                ids.push(*id);
            }
        }
        let by = if exact.is_some() { ResolvedBy::FunctionName } else { ResolvedBy::Variant };
        match ids.len() {
            0 => Resolution::NotFound,
            1 => Resolution::Unique(ids[0], by),
            _ => Resolution::Ambiguous(ids, by),
        }
    }

    pub(super) fn has_tool(&self, std_name: &str) -> bool {
        self.tools.contains(std_name)
    }

    pub(super) fn resolve_pair(&self, tool: &str, api: &str) -> Option<ApiId> {
        let key = (standardize(tool), standardize_member(api));
        self.pairs.get(&key).and_then(|ids| ids.first().copied())
    }

    /// Up to `max` function names like `name`: those containing it
    /// (shortest first), then the most similar (Jaro-Winkler ≥ 0.8).
    pub(super) fn suggest<'a>(&self, apis: &'a [Api], name: &str, max: usize) -> Vec<&'a str> {
        let key = lookup_key(name);
        if key.is_empty() {
            return Vec::new();
        }
        let mut scored: Vec<(f64, &str)> = apis
            .iter()
            .filter_map(|a| {
                let f = a.function_name.as_str();
                let score =
                    if f.contains(&key) { 2.0 - f.len() as f64 / 1000.0 } else { strsim::jaro_winkler(&key, f) };
                (score >= 0.8).then_some((score, f))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        scored.into_iter().take(max).map(|(_, n)| n).collect()
    }
}
