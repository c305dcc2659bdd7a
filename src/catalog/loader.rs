//! Loading a catalog from its sources.
//!
//! Paths are files or directories; each file's format is told by its
//! extension (`.json`: a ToolBench tool or an OpenAPI spec, by content;
//! `.jsonl`: compacted ToolBench tools; `.yaml`/`.yml`: an OpenAPI spec).
//! Files are parsed in parallel but assembled in sorted path order, so ids
//! and names are the same on every load of the same sources. A file that
//! cannot be used is skipped and reported with its reason; only a
//! configured path that does not exist (or a query file that cannot be
//! read) stops the load.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::draft::{Notes, ToolDraft};
use super::names::{MAX_FUNCTION_NAME, last_chars, openai_safe, toolbench_function_name};
use super::reuse::Previous;
use super::toolbench::{QueryApiEntry, ToolFile};
use super::{Api, ApiId, Catalog, Origin, Stamp, Tool, ToolId, embedded, openapi, toolbench};

/// Upper bound on catalog parsing threads (the work is I/O and JSON parsing).
pub(crate) const MAX_LOAD_THREADS: usize = 8;

/// What a catalog is loaded from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sources {
    /// ToolBench tool directories or files, JSONL files, OpenAPI specs or directories of them.
    pub paths: Vec<PathBuf>,
    /// Add the embedded example specs even when `paths` is not empty
    /// (with no paths they are the catalog).
    pub include_embedded: bool,
    /// ToolBench query files whose `api_list` entries add the tools that
    /// have no tool file.
    pub query_files: Vec<PathBuf>,
}

/// A reason the catalog could not be loaded at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("catalog path {}: {source}", path.display())]
    Path { path: PathBuf, source: std::io::Error },
    #[error("query file {}: {reason}", path.display())]
    QueryFile { path: PathBuf, reason: String },
}

/// Something left out of the catalog, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub(crate) path: String,
    pub(crate) reason: String,
}

/// What loading found. Part of `catalog stats`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadReport {
    /// Files read (tool files, JSONL files, specs; query files not counted).
    pub files_read: usize,
    /// Of those, files a reload took from the catalog in use, unchanged
    /// since it read them (not read again).
    pub files_reused: usize,
    /// Files in catalog directories whose extension is not a catalog format.
    pub files_ignored: usize,
    pub skipped_files: Vec<Skipped>,
    /// API entries (or spec operations) skipped inside files that were kept.
    pub skipped_apis: Vec<Skipped>,
    /// APIs kept whose input schema cannot be used: their calls pass unchecked.
    pub unchecked_apis: Vec<Skipped>,
    /// Documented defaults the declared type cannot hold, by reason.
    pub defaults_dropped: BTreeMap<String, usize>,
    /// Parameters listed twice in one API (the first is kept).
    pub duplicate_params: usize,
    /// Parameters whose standardized key clashed and got a suffix.
    pub renamed_params: usize,
    /// URL placeholders with no parameter, added as required strings.
    pub synthesized_path_params: usize,
    /// Optional path parameters without a default, made required.
    pub path_params_made_required: usize,
    /// Function names longer than 64 characters before the cut.
    pub names_cut: usize,
    /// Function names rewritten to satisfy OpenAI's rule (CJK, `^`).
    pub names_sanitized: usize,
    /// Function names given a numeric suffix to be unique.
    pub names_disambiguated: usize,
    /// Tools and APIs added from query files' `api_list`.
    pub query_tools_added: usize,
    pub query_apis_added: usize,
    pub elapsed_ms: u128,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Json,
    Jsonl,
    Yaml,
}

fn format_of(path: &Path) -> Option<Format> {
    // Not `Path::extension`: a file named just `.json` (a tool whose
    // standardized name is empty) has none by its rules.
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    match name.rsplit_once('.')?.1 {
        "json" => Some(Format::Json),
        "jsonl" => Some(Format::Jsonl),
        "yaml" | "yml" => Some(Format::Yaml),
        _ => None,
    }
}

struct Job {
    path: PathBuf,
    format: Format,
}

struct Parsed {
    tools: Result<Vec<ToolDraft>, String>,
    notes: Notes,
}

impl Catalog {
    /// Loads a catalog. Unusable files are skipped and reported in
    /// [`Catalog::report`]; only missing paths and unreadable query files fail.
    pub fn load(sources: &Sources) -> Result<Catalog, LoadError> {
        Catalog::load_reusing(sources, None)
    }

    /// [`Catalog::load`] again, taking the tools of every file not written
    /// since this catalog read it from this catalog (module `reuse`): the
    /// same catalog a fresh load makes, without reading what did not change.
    pub fn reload(&self, sources: &Sources) -> Result<Catalog, LoadError> {
        Catalog::load_reusing(sources, Some(&Previous::of(self)))
    }

    fn load_reusing(sources: &Sources, previous: Option<&Previous<'_>>) -> Result<Catalog, LoadError> {
        let start = Instant::now();
        let mut report = LoadReport::default();
        let jobs = collect_jobs(&sources.paths, &mut report)?;
        report.files_read = jobs.len();
        // Before reading: a file written meanwhile is read again at the next reload.
        let stamp = stamp_of(sources, &jobs);
        let mut reused: Vec<Option<(Vec<ToolDraft>, Notes)>> = match previous {
            Some(previous) => {
                jobs.iter().zip(stamp.files()).map(|(job, (_, now))| previous.reuse(&job.path, now)).collect()
            }
            None => jobs.iter().map(|_| None).collect(),
        };
        report.files_reused = reused.iter().flatten().count();
        let to_parse: Vec<&Job> = jobs.iter().zip(&reused).filter(|(_, r)| r.is_none()).map(|(job, _)| job).collect();
        let mut parsed = parse_all(&to_parse).into_iter();
        let mut builder = Builder::default();
        if sources.paths.is_empty() || sources.include_embedded {
            for (name, text) in embedded::SPECS {
                let mut notes = Notes::default();
                let doc: Value = serde_saphyr::from_str(text).expect("embedded specs parse (tested)");
                let tool = openapi::parse(&doc, Origin::Embedded, &mut notes).expect("embedded specs load (tested)");
                builder.add(tool, PathBuf::from(format!("embedded:{name}")));
            }
        }
        let mut notes_by_file = HashMap::new();
        for (job, reused) in jobs.iter().zip(&mut reused) {
            let parsed = match reused.take() {
                Some((tools, notes)) => Parsed { tools: Ok(tools), notes },
                None => parsed.next().expect("a parse for every file not reused"),
            };
            let location = job.path.display().to_string();
            if !parsed.notes.is_empty() {
                notes_by_file.insert(job.path.clone(), parsed.notes.clone());
            }
            merge_notes(&mut report, &location, parsed.notes);
            match parsed.tools {
                Ok(tools) => {
                    for tool in tools {
                        builder.add(tool, job.path.clone());
                    }
                }
                Err(reason) => {
                    tracing::warn!(file = %location, %reason, "skipping catalog file");
                    report.skipped_files.push(Skipped { path: location, reason });
                }
            }
        }
        for path in &sources.query_files {
            add_query_tools(&mut builder, path, &mut report)?;
        }
        let (tools, apis) = builder.finish(&mut report);
        report.elapsed_ms = start.elapsed().as_millis();
        Ok(Catalog { stamp, notes: notes_by_file, ..Catalog::new(tools, apis, report) })
    }
}

impl Sources {
    /// The stamp of the files these sources name now: what
    /// [`Catalog::stamp`] is if nothing was written since it was loaded.
    pub(crate) fn stamp(&self) -> Result<Stamp, LoadError> {
        Ok(stamp_of(self, &collect_jobs(&self.paths, &mut LoadReport::default())?))
    }
}

fn stamp_of(sources: &Sources, jobs: &[Job]) -> Stamp {
    let files = jobs.iter().map(|job| job.path.as_path()).chain(sources.query_files.iter().map(PathBuf::as_path));
    Stamp::of(sources, files)
}

fn collect_jobs(paths: &[PathBuf], report: &mut LoadReport) -> Result<Vec<Job>, LoadError> {
    let mut jobs = Vec::new();
    for root in paths {
        let meta = std::fs::metadata(root).map_err(|source| LoadError::Path { path: root.clone(), source })?;
        if meta.is_file() {
            // A file named explicitly is read whatever its extension (as JSON if unknown).
            jobs.push(Job { path: root.clone(), format: format_of(root).unwrap_or(Format::Json) });
            continue;
        }
        for entry in walkdir::WalkDir::new(root).follow_links(true).sort_by_file_name() {
            let entry = entry.map_err(|e| LoadError::Path {
                path: e.path().unwrap_or(root).to_path_buf(),
                source: e.into_io_error().unwrap_or_else(|| std::io::Error::other("symlink loop")),
            })?;
            if !entry.file_type().is_file() {
                continue;
            }
            match format_of(entry.path()) {
                Some(format) => jobs.push(Job { path: entry.into_path(), format }),
                None => report.files_ignored += 1,
            }
        }
    }
    Ok(jobs)
}

/// Parses every job on a few threads; results come back in job order.
fn parse_all(jobs: &[&Job]) -> Vec<Parsed> {
    let workers =
        std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, MAX_LOAD_THREADS).min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<Parsed>> = (0..jobs.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else { break };
                        let parsed = std::panic::catch_unwind(|| parse_job(job)).unwrap_or_else(|_| Parsed {
                            tools: Err("internal error: the parser panicked (please report this file)".into()),
                            notes: Notes::default(),
                        });
                        done.push((i, parsed));
                    }
                    done
                })
            })
            .collect();
        for handle in handles {
            for (i, parsed) in handle.join().expect("parse workers catch panics") {
                results[i] = Some(parsed);
            }
        }
    });
    results.into_iter().map(|r| r.expect("every job parsed")).collect()
}

fn parse_job(job: &Job) -> Parsed {
    let mut notes = Notes::default();
    let tools = std::fs::read(&job.path).map_err(|e| format!("cannot read: {e}")).and_then(|bytes| match job.format {
        Format::Json => parse_json(&bytes, &category_of(&job.path), &mut notes),
        Format::Jsonl => parse_jsonl(&bytes, &mut notes),
        Format::Yaml => {
            let text = std::str::from_utf8(&bytes).map_err(|e| format!("not UTF-8: {e}"))?;
            let doc: Value = serde_saphyr::from_str(text).map_err(|e| format!("invalid YAML: {e}"))?;
            if !openapi::is_spec(&doc) {
                return Err("not an OpenAPI spec (no `openapi` field)".to_string());
            }
            openapi::parse(&doc, Origin::OpenApi, &mut notes).map(|t| vec![t])
        }
    });
    Parsed { tools, notes }
}

/// A `.json` file: a ToolBench tool (fast typed parse) or an OpenAPI spec.
pub(crate) fn parse_json(bytes: &[u8], category: &str, notes: &mut Notes) -> Result<Vec<ToolDraft>, String> {
    if let Ok(file) = serde_json::from_slice::<ToolFile>(bytes) {
        return toolbench::tool_draft(file, category, Origin::ToolBench, notes).map(|t| vec![t]);
    }
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
    if openapi::is_spec(&doc) {
        openapi::parse(&doc, Origin::OpenApi, notes).map(|t| vec![t])
    } else {
        toolbench::salvage(doc, category, Origin::ToolBench, notes).map(|t| vec![t])
    }
}

/// A compacted-tools file: one `{"category", "tool_file", "tool"}` object per line.
fn parse_jsonl(bytes: &[u8], notes: &mut Notes) -> Result<Vec<ToolDraft>, String> {
    #[derive(Deserialize)]
    struct Line {
        category: String,
        tool: Value,
    }
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut tools = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let parsed = serde_json::from_str::<Line>(line)
            .map_err(|e| format!("not a compacted tool: {e}"))
            .and_then(|l| toolbench::salvage(l.tool, &l.category, Origin::ToolBenchCompact, notes));
        match parsed {
            Ok(tool) => tools.push(tool),
            Err(reason) => notes.skipped_lines.push((i + 1, reason)),
        }
    }
    Ok(tools)
}

/// A ToolBench tool's category is the name of its file's directory.
fn category_of(path: &Path) -> String {
    path.parent().and_then(Path::file_name).and_then(|n| n.to_str()).unwrap_or("Uncategorized").to_string()
}

fn merge_notes(report: &mut LoadReport, location: &str, notes: Notes) {
    for reason in notes.skipped_apis {
        report.skipped_apis.push(Skipped { path: location.to_string(), reason });
    }
    for (line, reason) in notes.skipped_lines {
        tracing::warn!(file = %location, line, %reason, "skipping catalog line");
        report.skipped_files.push(Skipped { path: format!("{location}:{line}"), reason });
    }
    for reason in notes.defaults_dropped {
        // "default X is not a number" -> "is not a number"
        let kind = reason.rsplit_once(" is ").map_or(reason.as_str(), |(_, k)| k);
        *report.defaults_dropped.entry(format!("is {kind}")).or_default() += 1;
    }
    report.duplicate_params += notes.duplicate_params;
    report.renamed_params += notes.renamed_params;
    report.synthesized_path_params += notes.synthesized_path_params;
    report.path_params_made_required += notes.path_params_made_required;
}

/// Adds the tools of a query file's `api_list` that the catalog lacks
/// (matched on standardized tool names), each API once.
fn add_query_tools(builder: &mut Builder, path: &Path, report: &mut LoadReport) -> Result<(), LoadError> {
    let fail = |reason: String| LoadError::QueryFile { path: path.to_path_buf(), reason };
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let records: Vec<Value> =
        serde_json::from_slice(&bytes).map_err(|e| fail(format!("expected a JSON list of queries: {e}")))?;
    let known: HashSet<String> = builder.tools.iter().map(|t| t.std_name.clone()).collect();
    let mut added: Vec<(ToolDraft, HashSet<String>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut notes = Notes::default();
    for (q, record) in records.iter().enumerate() {
        let entries = record.get("api_list").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for (i, entry) in entries.iter().enumerate() {
            let entry: QueryApiEntry = match serde_json::from_value(entry.clone()) {
                Ok(e) => e,
                Err(e) => {
                    notes.skip_api(format!("query [{q}] api_list[{i}]: {e}"));
                    continue;
                }
            };
            let tool = toolbench::query_tool_draft(&entry);
            if known.contains(&tool.std_name) {
                continue;
            }
            let slot = *index.entry(tool.std_name.clone()).or_insert_with(|| {
                added.push((tool, HashSet::new()));
                added.len() - 1
            });
            let api = toolbench::query_api_draft(entry, &mut notes);
            let (draft, seen) = &mut added[slot];
            if seen.insert(api.std_name.clone()) {
                draft.apis.push(api);
            }
        }
    }
    merge_notes(report, &path.display().to_string(), notes);
    for (tool, _) in added {
        report.query_tools_added += 1;
        report.query_apis_added += tool.apis.len();
        builder.add(tool, path.to_path_buf());
    }
    Ok(())
}

/// Accumulates tools and APIs, then assigns function names.
#[derive(Default)]
struct Builder {
    tools: Vec<Tool>,
    apis: Vec<Api>,
    /// Standardized API name of each API (same index as `apis`).
    std_api_names: Vec<String>,
}

impl Builder {
    fn add(&mut self, draft: ToolDraft, source: PathBuf) {
        let tool_id = ToolId(self.tools.len() as u32);
        for api in draft.apis {
            self.std_api_names.push(api.std_name);
            self.apis.push(Api {
                id: ApiId(self.apis.len() as u32),
                tool: tool_id,
                name: api.name,
                function_name: String::new(),
                description: api.description,
                method: api.method,
                url_template: api.url_template,
                params: api.params,
                declared_schema: None,
                unchecked: None,
                mcp: None,
            });
        }
        self.tools.push(Tool {
            id: tool_id,
            name: draft.name,
            std_name: draft.std_name,
            category: draft.category,
            description: draft.description,
            host: draft.host,
            score: draft.score,
            origin: draft.origin,
            source,
        });
    }

    /// Gives every API a unique, OpenAI-valid function name: ToolBench's
    /// `<std api>_for_<std tool>` (made OpenAI-safe) where it is unique;
    /// otherwise the first API in load order keeps it and the others get
    /// the smallest free `_2`, `_3`… suffix (the name cut to stay within 64).
    fn finish(mut self, report: &mut LoadReport) -> (Vec<Tool>, Vec<Api>) {
        let mut bases = Vec::with_capacity(self.apis.len());
        for (api, std_api) in self.apis.iter().zip(&self.std_api_names) {
            let std_tool = &self.tools[api.tool.0 as usize].std_name;
            if std_api.chars().count() + std_tool.chars().count() + "_for_".len() > MAX_FUNCTION_NAME {
                report.names_cut += 1;
            }
            let raw = toolbench_function_name(std_api, std_tool);
            let safe = openai_safe(&raw);
            if safe != raw {
                report.names_sanitized += 1;
            }
            bases.push(safe);
        }
        let mut taken: HashSet<String> = HashSet::with_capacity(bases.len());
        let mut clashes = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            if !taken.insert(base.clone()) {
                clashes.push(i);
            }
        }
        for i in clashes {
            let base = &bases[i];
            let name = (2..)
                .map(|n| {
                    let suffix = format!("_{n}");
                    format!("{}{suffix}", last_chars(base, MAX_FUNCTION_NAME - suffix.len()))
                })
                .find(|candidate| !taken.contains(candidate))
                .expect("unbounded");
            taken.insert(name.clone());
            bases[i] = name;
            report.names_disambiguated += 1;
        }
        for (api, name) in self.apis.iter_mut().zip(bases) {
            api.function_name = name;
        }
        (self.tools, self.apis)
    }
}
