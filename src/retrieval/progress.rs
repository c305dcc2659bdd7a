//! How far a long step has got (loading the engine, building the dense
//! index, embedding remembered runs), for the faces to say while it runs
//! and for the log.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// What a long step is doing and how far it has got, for a face to say
/// while the engine loads or the dense index builds ("building the search
/// index, 37% done, ready in about 520 s"). Updated by whoever does the
/// work; read from any thread.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    stage: Mutex<&'static str>,
    /// The counted stage ([`Progress::count`]) and when it began.
    counting: Mutex<Option<(&'static str, Instant)>>,
    /// Its work, and the work done so far.
    total: AtomicUsize,
    done: AtomicUsize,
}

/// A reading of [`Progress`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProgressReport {
    pub(crate) stage: &'static str,
    /// In a counted stage: the share done, 0-100.
    pub(crate) percent: Option<u32>,
    /// In a counted stage, once some work is done: seconds left, at the rate so far.
    pub(crate) eta_s: Option<u64>,
}

impl Progress {
    pub(crate) fn set_stage(&self, stage: &'static str) {
        *self.stage.lock().unwrap_or_else(|e| e.into_inner()) = stage;
    }

    /// Enters `stage`, whose `total` work is counted ([`Progress::advance`]).
    pub(crate) fn count(&self, stage: &'static str, total: usize) {
        self.set_stage(stage);
        self.total.store(total, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        *self.counting.lock().unwrap_or_else(|e| e.into_inner()) = Some((stage, Instant::now()));
    }

    /// `n` more of the counted stage's work is done.
    pub(crate) fn advance(&self, n: usize) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn report(&self) -> ProgressReport {
        let stage = *self.stage.lock().unwrap_or_else(|e| e.into_inner());
        let counting = *self.counting.lock().unwrap_or_else(|e| e.into_inner());
        let (total, done) = (self.total.load(Ordering::Relaxed), self.done.load(Ordering::Relaxed));
        let since = counting.filter(|(counted, _)| *counted == stage && total > 0).map(|(_, since)| since);
        let percent = since.map(|_| (done.min(total) * 100 / total) as u32);
        let eta_s = since.filter(|_| done > 0).map(|since| {
            let rate = done as f64 / since.elapsed().as_secs_f64().max(1e-3);
            ((total - done.min(total)) as f64 / rate).ceil() as u64
        });
        ProgressReport { stage, percent, eta_s }
    }

    /// Logs the counted stage's progress when it has crossed another tenth
    /// since `logged` (the tenths logged so far, updated): "embedding
    /// remembered runs again: 40% (12 s, about 18 s left)".
    pub(crate) fn log_tenths(&self, logged: &mut usize) {
        let report = self.report();
        let Some(percent) = report.percent else { return };
        if (percent / 10) as usize <= *logged {
            return;
        }
        *logged = (percent / 10) as usize;
        let since = self.counting.lock().unwrap_or_else(|e| e.into_inner()).map(|(_, since)| since);
        let elapsed = since.map_or(0.0, |s| s.elapsed().as_secs_f64());
        let left = report.eta_s.map_or(String::new(), |s| format!(", about {s} s left"));
        tracing::info!("{}: {percent}% ({elapsed:.0} s{left})", report.stage);
    }
}

impl std::fmt::Display for ProgressReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.stage.is_empty() { "starting" } else { self.stage })?;
        if let Some(p) = self.percent {
            write!(f, ", {p}% done")?;
        }
        match self.eta_s {
            Some(s) => write!(f, ", ready in about {s} s"),
            None => Ok(()),
        }
    }
}
