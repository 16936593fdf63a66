//! `XidFanout`: hands each XID event to every receiver returned by
//! `GpuBackend::xid_events`, and keeps the events raised before the first
//! receiver exists (bounded) so none is lost between opening a backend and
//! subscribing to it.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::backend::XidEvent;

/// How many events are kept for the first receiver; older ones are dropped
/// (with a warning) beyond this.
pub const XID_BACKLOG_MAX: usize = 1024;

/// Subscribers and the backlog kept until the first one arrives.
#[derive(Debug, Default)]
pub struct XidFanout {
    state: Mutex<FanoutState>,
}

#[derive(Debug, Default)]
struct FanoutState {
    subscribed: bool,
    subscribers: Vec<UnboundedSender<XidEvent>>,
    backlog: VecDeque<XidEvent>,
}

impl XidFanout {
    /// An empty fan-out with no receivers yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new receiver. The first one also gets the backlog.
    pub fn subscribe(&self) -> UnboundedReceiver<XidEvent> {
        let (sender, receiver) = unbounded_channel();
        let mut state = self.lock();
        if !state.subscribed {
            state.subscribed = true;
            for event in state.backlog.drain(..) {
                // The receiver is in hand, so the send cannot fail.
                let _ = sender.send(event);
            }
        }
        state.subscribers.push(sender);
        receiver
    }

    /// Sends `event` to every live receiver (dropping closed ones), or keeps it
    /// for the first receiver if none has subscribed yet.
    pub fn publish(&self, event: XidEvent) {
        let mut state = self.lock();
        if !state.subscribed {
            if state.backlog.len() == XID_BACKLOG_MAX
                && let Some(dropped) = state.backlog.pop_front()
            {
                tracing::warn!(
                    gpu = dropped.gpu,
                    xid = dropped.xid,
                    "XID backlog full before anyone subscribed; dropping the oldest event"
                );
            }
            state.backlog.push_back(event);
            return;
        }
        state
            .subscribers
            .retain(|subscriber| subscriber.send(event.clone()).is_ok());
        if state.subscribers.is_empty() {
            tracing::warn!(
                gpu = event.gpu,
                xid = event.xid,
                "XID event raised but every receiver is gone"
            );
        }
    }

    /// The state, even if a thread panicked while holding the lock: every
    /// update leaves it consistent.
    fn lock(&self) -> MutexGuard<'_, FanoutState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(xid: u32) -> XidEvent {
        XidEvent {
            gpu: 0,
            xid,
            detail: String::new(),
        }
    }

    #[test]
    fn the_first_receiver_gets_the_backlog_later_ones_only_new_events() {
        let fanout = XidFanout::new();
        fanout.publish(event(79));
        let mut first = fanout.subscribe();
        let mut second = fanout.subscribe();
        fanout.publish(event(48));
        assert_eq!(first.try_recv().unwrap().xid, 79);
        assert_eq!(first.try_recv().unwrap().xid, 48);
        assert_eq!(second.try_recv().unwrap().xid, 48);
        assert!(second.try_recv().is_err());
    }

    #[test]
    fn the_backlog_is_bounded_and_keeps_the_newest() {
        let fanout = XidFanout::new();
        let total = u32::try_from(XID_BACKLOG_MAX).unwrap() + 5;
        for xid in 0..total {
            fanout.publish(event(xid));
        }
        let mut receiver = fanout.subscribe();
        assert_eq!(receiver.try_recv().unwrap().xid, 5);
        assert_eq!(receiver.len(), XID_BACKLOG_MAX - 1);
    }

    #[test]
    fn closed_receivers_are_dropped_and_others_still_served() {
        let fanout = XidFanout::new();
        let gone = fanout.subscribe();
        let mut kept = fanout.subscribe();
        drop(gone);
        fanout.publish(event(95));
        assert_eq!(kept.try_recv().unwrap().xid, 95);
    }
}
