//! Forks: a new session that starts where another one was — the branch point of a
//! conversation or of an agent graph. `Store::fork_session` copies the source's settings, the
//! messages the model saw up to a seq, and its whole graph checkpoint log
//! ([`Store::graph_copy`], LangGraph's `copy_thread`), so the fork lives, spills and restores
//! like any session while the source stays untouched.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::messages::{MessageQuery, NewMessage};
use crate::sessions::NewSession;
use crate::store::Store;

/// What a fork holds, returned by [`Store::fork_session`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fork {
    /// The new session's id.
    pub id: String,
    /// Messages copied (the source's active messages with seq <= `at`).
    pub messages: usize,
    /// Graph checkpoints copied.
    pub checkpoints: u64,
}

impl Store {
    /// Creates session `target` (generated when `None`) as a fork of `source`: its user,
    /// model, system prompt, config and TTL; metadata with `forked_from` = `{session, at}`
    /// added; the messages active in `source` with seq <= `at` (all when `None`), in order,
    /// re-numbered from 1 — the history the model saw at that point, compacted ranges left
    /// out and compaction notes kept; and `source`'s graph checkpoint log. The messages go in
    /// one atomic append.
    pub async fn fork_session(
        &self,
        source: &str,
        target: Option<&str>,
        at: Option<u64>,
    ) -> Result<Fork> {
        let src = self.require_session(source).await?;
        if let Some(at) = at {
            if at == 0 || at >= src.next_seq {
                return Err(Error::BadRange {
                    from: 1,
                    to: at,
                    detail: format!("the session's last seq is {}", src.next_seq - 1),
                });
            }
        }
        let messages: Vec<NewMessage> = self
            .messages(source, MessageQuery::active())
            .await?
            .into_iter()
            .filter(|m| at.is_none_or(|at| m.seq <= at))
            .map(|m| NewMessage {
                role: m.role,
                content: m.content,
                name: m.name,
                tool_calls: m.tool_calls,
                tool_call_id: m.tool_call_id,
                round_index: m.round_index,
                meta: m.meta,
            })
            .collect();
        let mut metadata = match src.metadata {
            Value::Object(m) => m,
            Value::Null => Default::default(),
            other => [("metadata".to_string(), other)].into_iter().collect(),
        };
        metadata.insert(
            "forked_from".into(),
            serde_json::json!({"session": source, "at": at}),
        );
        let mut new = NewSession::new()
            .ttl(std::time::Duration::from_secs(src.ttl))
            .config(src.config)
            .metadata(Value::Object(metadata));
        new.id = target.map(str::to_string);
        new.user_id = src.user_id;
        new.model = src.model;
        new.system_prompt = src.system_prompt;
        let id = self.create_session(&new).await?;
        if !messages.is_empty() {
            self.append_many(&id, &messages, Some(1)).await?;
        }
        let checkpoints = self.graph_copy(source, &id).await?;
        Ok(Fork {
            id,
            messages: messages.len(),
            checkpoints,
        })
    }
}
