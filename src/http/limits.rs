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
