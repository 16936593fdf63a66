//! Node states under sinfo's names: the compact ones of its default table
//! (`idle`, `mix`, `alloc`, `drng`, `drain`, `down`) and the long ones of
//! `--long` (`mixed`, `allocated`, `draining`, `drained`); and how many of a
//! node's GPUs could be given to a new job now.

use corral_state::node::{Node, NodeStateView};

/// sinfo's compact state name.
pub fn state_short(view: NodeStateView) -> &'static str {
    match view {
        NodeStateView::Idle => "idle",
        NodeStateView::Mixed => "mix",
        NodeStateView::Allocated => "alloc",
        NodeStateView::Draining => "drng",
        NodeStateView::Drained => "drain",
        NodeStateView::Down => "down",
    }
}

/// sinfo `--long`'s state name.
pub fn state_long(view: NodeStateView) -> &'static str {
    match view {
        NodeStateView::Idle => "idle",
        NodeStateView::Mixed => "mixed",
        NodeStateView::Allocated => "allocated",
        NodeStateView::Draining => "draining",
        NodeStateView::Drained => "drained",
        NodeStateView::Down => "down",
    }
}

/// GPUs a new job could get now: healthy, not drained, unallocated, on a node
/// that is up, not drained and not held exclusively.
pub fn free_gpus(node: &Node) -> usize {
    if !node.accepts_work() || node.is_held_exclusively() {
        return 0;
    }
    node.gpus.iter().filter(|g| g.is_free_and_usable()).count()
}
