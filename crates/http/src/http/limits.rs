//! What bounds the HTTP door: sizes, timeouts, connections, and each
//! token's rate (a token bucket: `rate` requests a second, bursts of
//! `burst`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::lock::{rank, Mutex};

#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// The most header bytes a request may send.
    pub max_headers: usize,
    /// How long a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body.
    pub body_timeout: Duration,
    /// The most requests served at once (more wait, their bodies unread).
    pub max_connections: usize,
    /// The most connections still sending their first head (over it, the
    /// oldest of them is closed).
    pub max_pending: usize,
    /// Requests per second each token may make, on average.
    pub rate: f64,
    /// How many it may make at once.
    pub burst: f64,
    /// The most requests one token may have in flight at once (its head
    /// read, its body being read or its call answered): no token can hold
    /// more than its share of `max_connections`.
    pub per_token: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_body: 8 << 20,
            max_headers: 64 << 10,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 256,
            max_pending: 1024,
            rate: 200.0,
            burst: 400.0,
            per_token: 128,
        }
    }
}

/// The requests each token has in flight, bounded by
/// [`Bounds::per_token`].
pub struct TokenSlots {
    most: usize,
    held: Mutex<HashMap<String, usize>>,
}

/// One request's slot among its token's: given back when the last copy of
/// it (the request's parts carry it to the handler) is dropped.
#[derive(Clone)]
pub struct Slot {
    /// Held for its drop alone.
    _held: std::sync::Arc<Held>,
}

struct Held {
    slots: std::sync::Arc<TokenSlots>,
    token: String,
}

impl TokenSlots {
    pub fn new(most: usize) -> std::sync::Arc<TokenSlots> {
        std::sync::Arc::new(TokenSlots {
            most: most.max(1),
            held: Mutex::new(rank::TOKEN_SLOTS, HashMap::new()),
        })
    }

    /// A slot for one more request of `token`, if it has fewer than its
    /// most in flight.
    pub fn take(self: &std::sync::Arc<Self>, token: &str) -> Option<Slot> {
        let mut held = self.held.lock();
        let n = held.entry(token.to_string()).or_insert(0);
        if *n >= self.most {
            return None;
        }
        *n += 1;
        Some(Slot {
            _held: std::sync::Arc::new(Held {
                slots: self.clone(),
                token: token.to_string(),
            }),
        })
    }

    pub fn most(&self) -> usize {
        self.most
    }

    /// Requests `token` has in flight.
    pub fn in_flight(&self, token: &str) -> usize {
        self.held.lock().get(token).copied().unwrap_or(0)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock();
        if let Some(n) = held.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.token);
            }
        }
    }
}

/// Each token's bucket.
pub struct Rates {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl Rates {
    pub fn new(bounds: &Bounds) -> Rates {
        Rates {
            rate: bounds.rate.max(0.001),
            burst: bounds.burst.max(1.0),
            buckets: Mutex::new(rank::RATE_BUCKETS, HashMap::new()),
        }
    }

    /// Takes one request from `token`'s bucket; when it is empty, the
    /// seconds until it holds one again.
    pub fn take(&self, token: &str) -> Result<(), u64> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        if buckets.len() > 100_000 {
            // Full buckets say nothing; dropping them forgets no debt.
            let burst = self.burst;
            buckets.retain(|_, (level, _)| *level < burst);
        }
        let (level, at) = buckets
            .entry(token.to_string())
            .or_insert((self.burst, now));
        *level = (*level + now.duration_since(*at).as_secs_f64() * self.rate).min(self.burst);
        *at = now;
        if *level >= 1.0 {
            *level -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *level) / self.rate).ceil() as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refuses_with_a_wait() {
        let rates = Rates::new(&Bounds {
            rate: 1.0,
            burst: 3.0,
            ..Bounds::default()
        });
        for _ in 0..3 {
            assert_eq!(rates.take("a"), Ok(()));
        }
        assert_eq!(rates.take("a"), Err(1));
        // Another token has its own bucket.
        assert_eq!(rates.take("b"), Ok(()));
    }
}
