//! Jobserver tokens for the second and later threads of a worker pool
//! (nvcc jobs, nvdisasm runs): a token first, then an item, never the
//! other way round. A thread that took an item and then waited for a token
//! could wait forever: two build scripts on two cores hold both of cargo's
//! tokens, and neither gives its own back until all its threads are done,
//! so each waits on the other. A thread that waits for a token only while
//! items remain, and stops when none do, lets the first thread (which runs
//! on the build script's own token) finish everything alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

/// How long a thread waits for a token before it looks again whether
/// items remain.
const POLL: Duration = Duration::from_millis(10);

/// A pool's tokens: asked of the jobserver by its helper thread (cargo's
/// pipe cannot be read without blocking, and a blocked read cannot be
/// called off), handed to whichever thread is waiting.
pub(crate) struct Tokens {
    /// `None` without a jobserver (a tool or a test): threads run freely.
    helper: Option<jobserver::HelperThread>,
    received: Mutex<mpsc::Receiver<jobserver::Acquired>>,
}

impl Tokens {
    /// The tokens of `client` (cargo's jobserver, when there is one).
    pub(crate) fn new(client: Option<&jobserver::Client>) -> Tokens {
        let (send, received) = mpsc::channel();
        // A token that arrives when no thread waits any more is dropped
        // with the channel, which gives it back.
        let helper = client.and_then(|c| {
            c.clone()
                .into_helper_thread(move |token| {
                    if let Ok(token) = token {
                        let _ = send.send(token);
                    }
                })
                .ok()
        });
        Tokens {
            helper,
            received: Mutex::new(received),
        }
    }

    /// What thread `worker` needs before it takes the next item (`next` of
    /// `len`): nothing for the first thread, or without a jobserver; else
    /// a token, waited for while items remain. `None` when no item is
    /// left: the thread stops.
    pub(crate) fn before_next(
        &self,
        worker: usize,
        next: &AtomicUsize,
        len: usize,
    ) -> Option<Option<jobserver::Acquired>> {
        let Some(helper) = self.helper.as_ref().filter(|_| worker > 0) else {
            return Some(None);
        };
        if next.load(Ordering::SeqCst) >= len {
            return None;
        }
        helper.request_token();
        loop {
            let received = self.received.lock().ok()?.recv_timeout(POLL);
            match received {
                Ok(token) => return Some(Some(token)),
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if next.load(Ordering::SeqCst) >= len {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_without_a_token_stops_when_the_items_are_gone() {
        // A jobserver with no token free: the second thread waits, and
        // stops once the first has taken every item (before, it took an
        // item and then waited for a token that never came).
        let client = jobserver::Client::new(0).expect("jobserver");
        let tokens = Tokens::new(Some(&client));
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| tokens.before_next(1, &next, 3).is_none());
            std::thread::sleep(POLL * 5);
            next.store(3, Ordering::SeqCst);
            assert!(waiting.join().expect("thread"), "it took a turn");
        });
    }

    #[test]
    fn a_free_token_is_taken_and_the_first_thread_needs_none() {
        let client = jobserver::Client::new(1).expect("jobserver");
        let tokens = Tokens::new(Some(&client));
        let next = AtomicUsize::new(0);
        assert!(matches!(tokens.before_next(0, &next, 2), Some(None)));
        assert!(matches!(
            Tokens::new(None).before_next(1, &next, 2),
            Some(None)
        ));
        let token = tokens.before_next(1, &next, 2);
        assert!(matches!(token, Some(Some(_))), "the free token");
        // Held: none left for another thread, which stops with the items.
        next.store(2, Ordering::SeqCst);
        assert!(tokens.before_next(2, &next, 2).is_none());
    }
}
