//! Rows read as text: the one shape in which both durable tiers answer the same SQL (`?1`
//! bound as text when the statement has it; select text columns or `CAST(x AS TEXT)`). The
//! durable interface's `text_rows`, the retention plan and export read rows this way.

/// Rows read as text (NULL as `None`).
pub(crate) type TextRows = Vec<Vec<Option<String>>>;
