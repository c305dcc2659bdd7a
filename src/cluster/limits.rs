//! Rate limits shared by every replica: GCRA (the algorithm governor uses
//! locally) in one Lua script, so that checking all the limits a call takes
//! and committing them is atomic. Redis's own clock (`TIME`) is the clock,
//! so replicas' clocks need not agree. A host slowed by a 429 is a key with
//! that expiry, seen by every replica.
//!
//! Hand-written rather than a crate: the Redis rate-limit crates take one
//! key per call (a call here takes up to four limits at once, all or none)
//! and none checks a slowed host in the same round trip.

use std::time::Duration;

use redis::Script;

use super::{Cluster, ClusterError};

/// KEYS[1]: the host's slow key; KEYS[2..]: limit keys. ARGV: per limit key,
/// its emission interval and its tolerance (burst - 1 intervals), in
/// microseconds. Returns {0, 0} when every cell was taken, else
/// {index of the limit that said no (0: the slowed host), wait in µs}.
const GCRA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local slowed = redis.call('PTTL', KEYS[1])
if slowed > 0 then return {0, slowed * 1000} end
local tats = {}
for i = 2, #KEYS do
  local interval = tonumber(ARGV[2 * i - 3])
  local tolerance = tonumber(ARGV[2 * i - 2])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local wait = tat - tolerance - now
  if wait > 0 then return {i - 1, wait} end
  tats[i] = tat + interval
end
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], tats[i], 'PX', math.ceil((tats[i] - now) / 1000) + 1000)
end
return {0, 0}
"#;

/// One limit a call takes: its kind and key, interval and burst.
pub(crate) struct Cell<'a> {
    pub(crate) kind: &'static str,
    pub(crate) key: &'a str,
    pub(crate) interval: Duration,
    pub(crate) burst: u32,
}

/// What the shared limits said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every cell was taken.
    Taken,
    /// The host is slowed by a 429 for this long.
    Slowed(Duration),
    /// Cell `index` (of those asked) is not free for this long; none was taken.
    Wait(usize, Duration),
}

impl Cluster {
    /// Takes every cell at once, or none; `Err` when Redis is unreachable
    /// or slow (the caller falls back to its local limits).
    pub(crate) async fn take(&self, host: Option<&str>, cells: &[Cell<'_>]) -> Result<Verdict, ClusterError> {
        let script = Script::new(GCRA);
        let mut invocation = script.key(self.key("slow", host.unwrap_or("")));
        for cell in cells {
            let interval = cell.interval.as_micros() as u64;
            invocation
                .key(self.key(&format!("rate:{}", cell.kind), cell.key))
                .arg(interval)
                .arg(interval * u64::from(cell.burst.max(1) - 1));
        }
        let mut connection = self.connection.clone();
        let (index, wait): (i64, i64) = self.run(invocation.invoke_async(&mut connection)).await?;
        let wait = Duration::from_micros(wait.max(0) as u64);
        Ok(match (index, wait.is_zero()) {
            (_, true) => Verdict::Taken,
            (0, false) => Verdict::Slowed(wait),
            (i, false) => Verdict::Wait(i as usize - 1, wait),
        })
    }

    /// No replica calls `host` for `wait` (an upstream 429's `Retry-After`).
    pub(crate) async fn slow_host(&self, host: &str, wait: Duration) {
        let mut connection = self.connection.clone();
        let key = self.key("slow", host);
        let millis = wait.as_millis().max(1) as u64;
        let mut command = redis::cmd("SET");
        command.arg(&key).arg(1).arg("PX").arg(millis);
        let _ = self.run(command.query_async::<()>(&mut connection)).await;
    }
}
