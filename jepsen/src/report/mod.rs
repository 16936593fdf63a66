//! What a run tells its operator: the verdict table for the terminal, and a
//! self-contained HTML page with a timeline of faults, leaders and each GPU's
//! attempts.

mod table;
mod timeline;

pub use table::{recovery_table, verdict_table};
pub use timeline::timeline_html;
