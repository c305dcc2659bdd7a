//! Milliseconds, the unit of every duration toolrouter reports (traces,
//! timings, benchmarks, log lines) and of every time setting in the
//! configuration (`*_ms` keys, read with `Duration::from_millis`).

use std::time::Duration;

/// `d` in milliseconds, with fractions (`1.5` for 1500 µs).
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    #[test]
    fn milliseconds_keep_their_fractions() {
        assert_eq!(super::ms(std::time::Duration::from_micros(1500)), 1.5);
    }
}
