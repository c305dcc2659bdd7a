//! The servers of a client's tool list: tools come in servers (an MCP
//! server, a REST service), and a request that matches a server's tools
//! as a whole lifts each of them (catalog search does the same with its
//! tool-level lists, where a ToolBench tool or a downstream server is the
//! unit).
//!
//! A tool's server is read from its name, in the two conventions clients
//! and gateways use: `server__tool` (toolrouter's own downstream tools,
//! Claude Code's `mcp__server__tool`, most MCP gateways: everything before
//! the last `__`) and ToolBench's `api_for_tool` (everything after the last
//! `_for_`). A name in neither form has no server. The lift only exists
//! when at least two servers have two tools or more: a list of one server,
//! or of lone tools, has nothing to tell apart.

use std::collections::HashMap;

use super::super::bm25::Bm25;
use crate::catalog::NAMESPACE_SEPARATOR;

/// A tool set's servers: each tool's server and a BM25 index over each
/// server's document (its name and every one of its tools' text).
pub(super) struct Servers {
    /// `of_tool[i]`: the server of tool `i`, when it has one.
    of_tool: Vec<Option<u32>>,
    bm25: Bm25,
    /// Tools per server.
    sizes: Vec<u32>,
}

/// The server a tool's name says it belongs to, when it says.
fn server_of(name: &str) -> Option<&str> {
    split_name(name).0
}

/// A tool's name as its server (when the name says) and its own part:
/// `slack__list_channels` is `list_channels` of `slack`,
/// `get_weather_for_openweather` `get_weather` of `openweather`.
pub(super) fn split_name(name: &str) -> (Option<&str>, &str) {
    if let Some((server, tool)) = name.rsplit_once(NAMESPACE_SEPARATOR) {
        if !server.is_empty() && !tool.is_empty() {
            return (Some(server), tool);
        }
        return (None, name);
    }
    match name.rsplit_once("_for_") {
        Some((api, tool)) if !api.is_empty() && !tool.is_empty() => (Some(tool), api),
        _ => (None, name),
    }
}

impl Servers {
    /// The servers of tools `names` (with texts `texts`), when at least two
    /// have two tools or more.
    pub(super) fn of(names: &[String], texts: &[String]) -> Option<Servers> {
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut documents: Vec<String> = Vec::new();
        let mut sizes: Vec<u32> = Vec::new();
        let mut of_tool = Vec::with_capacity(names.len());
        for (name, text) in names.iter().zip(texts) {
            let Some(server) = server_of(name) else {
                of_tool.push(None);
                continue;
            };
            let id = *ids.entry(server).or_insert_with(|| {
                documents.push(server.replace(['_', '-'], " "));
                sizes.push(0);
                (documents.len() - 1) as u32
            });
            documents[id as usize].push(' ');
            documents[id as usize].push_str(text);
            sizes[id as usize] += 1;
            of_tool.push(Some(id));
        }
        if sizes.iter().filter(|&&n| n >= 2).count() < 2 {
            return None;
        }
        Some(Servers { of_tool, bm25: Bm25::build(&documents), sizes })
    }

    /// Each tool ranked by its server's BM25 rank for `query` (a server's
    /// tools share its rank; lone tools and unmatched servers are left out).
    pub(super) fn ranked_tools(&self, query: &str) -> Vec<(u32, u32)> {
        let ranked = self.bm25.search(query, self.sizes.len(), None);
        let mut rank_of: Vec<Option<u32>> = vec![None; self.sizes.len()];
        for (rank, (server, _)) in ranked.iter().enumerate() {
            rank_of[*server as usize] = Some(rank as u32);
        }
        let mut tools: Vec<(u32, u32)> =
            self.of_tool.iter().enumerate().filter_map(|(i, s)| Some((i as u32, rank_of[(*s)? as usize]?))).collect();
        tools.sort_by_key(|&(i, rank)| (rank, i));
        tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_read_from_either_naming_convention() {
        assert_eq!(server_of("slack__list_channels"), Some("slack"));
        assert_eq!(server_of("mcp__github__create_issue"), Some("mcp__github"));
        assert_eq!(server_of("songkick_concert_for_theclique"), Some("theclique"));
        assert_eq!(server_of("get_weather"), None);
        assert_eq!(server_of("__x"), None);
        assert_eq!(server_of("x__"), None);
    }

    #[test]
    fn the_tools_of_a_matching_server_share_its_rank() {
        let names: Vec<String> =
            ["slack__post_message", "slack__list_channels", "git__status", "git__commit", "get_time"]
                .map(str::to_string)
                .into();
        let texts: Vec<String> = [
            "post a message to a channel",
            "list the channels of the workspace",
            "show the working tree status",
            "record changes to the repository",
            "current time",
        ]
        .map(str::to_string)
        .into();
        let servers = Servers::of(&names, &texts).expect("two servers of two tools");
        let ranked = servers.ranked_tools("post hello to the team channel");
        assert_eq!(ranked[..2], [(0, 0), (1, 0)], "both slack tools first, by its rank: {ranked:?}");
        assert!(ranked.iter().all(|&(i, _)| i != 4), "a lone tool has no server rank");
    }

    #[test]
    fn one_server_or_lone_tools_give_no_servers() {
        let names: Vec<String> = ["a__x", "a__y", "b__z", "lone"].map(str::to_string).into();
        let texts: Vec<String> = names.clone();
        assert!(Servers::of(&names, &texts).is_none());
    }
}
