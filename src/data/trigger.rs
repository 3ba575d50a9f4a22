//! [`Trigger`]: when the flight recorder dumps by itself (`Builder::dump_when`).

use std::time::Duration;

/// The default cool-down after a trigger fired: it does not fire again before it has passed.
pub const DEFAULT_TRIGGER_COOLDOWN: Duration = Duration::from_secs(60);

/// A condition on the recent calls of one region that makes the flight recorder dump by
/// itself (`Builder::dump_when`), beside the output as
/// `<stem>.dump-<trigger>-<unix seconds>.h5`.
///
/// The flusher checks triggers at every flush (`spool_sync_interval`, 1 s by default) over
/// the calls that *ended* in the trigger's last `over`. After firing, a trigger waits for
/// its cool-down ([`DEFAULT_TRIGGER_COOLDOWN`], see [`cooldown`](Self::cooldown)), so a
/// condition that holds for hours makes one dump per cool-down, not one per check.
///
/// ```
/// use std::time::Duration;
/// use scope_profiler::Trigger;
/// // A dump when the last 30 s of `handle_request` have a p99 above 250 ms, at most one
/// // every 10 minutes.
/// let slow = Trigger::p99_over("handle_request", Duration::from_millis(250), Duration::from_secs(30))
///     .cooldown(Duration::from_secs(600));
/// // A dump when `retry` runs more than 100 times a second over 10 s.
/// let storm = Trigger::calls_rate_over("retry", 100.0, Duration::from_secs(10));
/// # let _ = (slow, storm);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Trigger {
    pub(crate) region: String,
    pub(crate) kind: TriggerKind,
    pub(crate) over: Duration,
    pub(crate) cooldown: Duration,
}

/// What a [`Trigger`] watches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TriggerKind {
    /// The 99th percentile of the durations exceeds this many ns.
    P99Over(u64),
    /// More than this many calls a second.
    RateOver(f64),
}

impl Trigger {
    /// Fires when the 99th percentile of the durations of `region`'s calls that ended in the
    /// last `over` exceeds `budget` (to within 1/16 of the value: durations are binned on a
    /// log-linear scale). Needs at least 100 calls in that time.
    pub fn p99_over(region: impl Into<String>, budget: Duration, over: Duration) -> Trigger {
        Trigger {
            region: region.into(),
            kind: TriggerKind::P99Over(u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX)),
            over,
            cooldown: DEFAULT_TRIGGER_COOLDOWN,
        }
    }

    /// Fires when more than `per_second` calls of `region` a second ended, on average, in the
    /// last `over`.
    pub fn calls_rate_over(region: impl Into<String>, per_second: f64, over: Duration) -> Trigger {
        Trigger {
            region: region.into(),
            kind: TriggerKind::RateOver(per_second),
            over,
            cooldown: DEFAULT_TRIGGER_COOLDOWN,
        }
    }

    /// The least time between two dumps of this trigger (default
    /// [`DEFAULT_TRIGGER_COOLDOWN`]).
    pub fn cooldown(mut self, cooldown: Duration) -> Trigger {
        self.cooldown = cooldown;
        self
    }

    /// The name its dumps carry: `p99-<region>` or `rate-<region>`, the region's name kept to
    /// letters, digits, `_` and `-` (others become `_`), at most 40 characters.
    pub(crate) fn name(&self) -> String {
        let region: String = (self.region.chars().take(40))
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        match self.kind {
            TriggerKind::P99Over(_) => format!("p99-{region}"),
            TriggerKind::RateOver(_) => format!("rate-{region}"),
        }
    }

    /// Why it cannot work, if so (`build()` refuses it).
    pub(crate) fn invalid(&self) -> Option<String> {
        if self.over.is_zero() {
            return Some(format!(
                "trigger {}: `over` must be greater than zero",
                self.name()
            ));
        }
        if let TriggerKind::RateOver(r) = self.kind {
            if !(r.is_finite() && r >= 0.0) {
                return Some(format!(
                    "trigger {}: the rate {r} is not a number >= 0",
                    self.name()
                ));
            }
        }
        None
    }
}
