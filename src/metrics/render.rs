//! The Prometheus text exposition format (version 0.0.4) of a published snapshot: one
//! `# HELP` / `# TYPE` pair per family, every family's samples together, label values escaped
//! (`\\`, `\"`, `\n`), no timestamps. Integers are written without the formatting machinery:
//! at 1 000 regions a text has ~40 000 samples.

use std::fmt::Write as _;

use super::histogram::{le_label, FINITE};
use super::{Published, RegionSeries as Series, Shape};

/// `value` escaped for a label value of the text format.
pub(crate) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `name="value"` pairs joined by commas, values escaped.
pub(crate) fn label_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (name, value) in pairs {
        if !out.is_empty() {
            out.push(',');
        }
        let _ = write!(out, "{name}=\"{}\"", escape(value));
        // `name` is checked at build (options::check), so it needs no escaping.
    }
    out
}

/// A metric name made of `event`: every character outside `[a-zA-Z0-9_]` becomes `_`.
pub(crate) fn metric_part(event: &str) -> String {
    event
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Appends the decimal digits of `v`.
fn push_u64(out: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // The buffer holds ASCII digits only.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

/// Appends `ns` in seconds.
fn push_seconds(out: &mut String, ns: u64) {
    let _ = write!(out, "{}", ns as f64 / 1e9);
}

/// Writes samples of one snapshot; `consts` are the constant labels (may be empty).
struct Writer<'a> {
    out: String,
    consts: &'a str,
}

impl Writer<'_> {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = write!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
    }

    /// `name{region="..",consts[,extra]} ` (the value follows).
    fn start(&mut self, name: &str, region: Option<&str>, extra: Option<(&str, &str)>) {
        self.out.push_str(name);
        let mut sep = '{';
        if let Some(r) = region {
            self.out.push(sep);
            self.out.push_str("region=\"");
            self.out.push_str(r);
            self.out.push('"');
            sep = ',';
        }
        if !self.consts.is_empty() {
            self.out.push(sep);
            self.out.push_str(self.consts);
            sep = ',';
        }
        if let Some((k, v)) = extra {
            self.out.push(sep);
            let _ = write!(self.out, "{k}=\"{v}\"");
            sep = ',';
        }
        if sep == ',' {
            self.out.push('}');
        }
        self.out.push(' ');
    }

    fn int(&mut self, name: &str, region: Option<&str>, v: u64) {
        self.start(name, region, None);
        push_u64(&mut self.out, v);
        self.out.push('\n');
    }

    fn seconds(&mut self, name: &str, region: Option<&str>, ns: u64) {
        self.start(name, region, None);
        push_seconds(&mut self.out, ns);
        self.out.push('\n');
    }
}

/// The exposition text of `p`.
pub(crate) fn render(p: &Published, shape: &Shape) -> String {
    // ~40 samples of ~70 bytes per region.
    let mut w = Writer {
        out: String::with_capacity(1024 + p.regions.len() * 40 * (70 + shape.consts.len())),
        consts: &shape.consts,
    };
    let regions: Vec<(String, &Series)> = p
        .regions
        .iter()
        .map(|(name, s)| (escape(name), &**s))
        .collect();
    let counter = |w: &mut Writer<'_>, name: &str, help: &str, ns: bool, v: fn(&Series) -> u64| {
        w.family(name, "counter", help);
        for (r, s) in &regions {
            if ns {
                w.seconds(name, Some(r), v(s));
            } else {
                w.int(name, Some(r), v(s));
            }
        }
    };
    counter(
        &mut w,
        "scope_region_calls_total",
        "Calls of the region completed since the profiler was built.",
        false,
        |s| s.calls,
    );
    counter(
        &mut w,
        "scope_region_seconds_total",
        "Time in the region's completed calls (first enter to last exit), in seconds.",
        true,
        |s| s.total_ns,
    );
    histogram(&mut w, &regions);
    if shape.track_async {
        counter(
            &mut w,
            "scope_region_await_seconds_total",
            "Time the region's completed calls spent suspended between polls, in seconds.",
            true,
            |s| s.await_ns,
        );
        // Hook for the scheduling split (issue 21): `scope_region_scheduled_seconds_total`
        // goes here once the flusher measures it (see `accumulate::RegionSeries`).
    }
    perf(&mut w, p, &regions);
    process(&mut w, p);
    w.out
}

fn histogram(w: &mut Writer<'_>, regions: &[(String, &Series)]) {
    const NAME: &str = "scope_region_duration_seconds";
    w.family(
        NAME,
        "histogram",
        "Durations of the region's completed calls, in seconds (4 buckets per decade, 1 us to 100 s).",
    );
    let les: Vec<String> = (0..FINITE).map(le_label).collect();
    for (r, s) in regions {
        let mut cumulative = 0;
        for (i, le) in les.iter().enumerate() {
            cumulative += s.buckets[i];
            w.start(
                "scope_region_duration_seconds_bucket",
                Some(r),
                Some(("le", le)),
            );
            push_u64(&mut w.out, cumulative);
            w.out.push('\n');
        }
        cumulative += s.buckets[FINITE];
        w.start(
            "scope_region_duration_seconds_bucket",
            Some(r),
            Some(("le", "+Inf")),
        );
        push_u64(&mut w.out, cumulative);
        w.out.push('\n');
        w.seconds("scope_region_duration_seconds_sum", Some(r), s.total_ns);
        w.int("scope_region_duration_seconds_count", Some(r), s.calls);
    }
}

fn perf(w: &mut Writer<'_>, p: &Published, regions: &[(String, &Series)]) {
    let Some(perf) = &p.perf else {
        return;
    };
    let n = perf.events.len();
    for (k, event) in perf.events.iter().enumerate() {
        let name = format!("scope_region_perf_{}_total", metric_part(event));
        w.family(
            &name,
            "counter",
            &format!(
                "perf event `{event}` counted in the region's polls since the profiler was \
                 built (nested regions count inclusively)."
            ),
        );
        for (i, (r, _)) in regions.iter().enumerate() {
            w.int(
                &name,
                Some(r),
                perf.values.get(i * n + k).copied().unwrap_or(0),
            );
        }
    }
}

fn process(w: &mut Writer<'_>, p: &Published) {
    let t = &p.process;
    let counters: [(&str, &str, u64, bool); 3] = [
        (
            "scope_dropped_calls_total",
            "Calls dropped whole because a record of theirs could not be buffered.",
            t.dropped_calls,
            false,
        ),
        (
            "scope_backpressure_wait_seconds_total",
            "Time recording threads waited for the flusher to free a buffer, in seconds.",
            t.wait_ns,
            true,
        ),
        (
            "scope_flusher_cpu_seconds_total",
            "CPU time of the profiler's flusher thread, in seconds.",
            t.flusher_cpu_ns,
            true,
        ),
    ];
    for (name, help, v, seconds) in counters {
        w.family(name, "counter", help);
        if seconds {
            w.seconds(name, None, v);
        } else {
            w.int(name, None, v);
        }
    }
    w.family(
        "scope_buffer_bytes",
        "gauge",
        "Bytes of record buffers the recording threads hold (bounded by the buffer budget).",
    );
    w.int("scope_buffer_bytes", None, t.buffer_bytes);
    w.family(
        "scope_regions_folded",
        "gauge",
        "Regions beyond the export limit, counted under region=\"other\".",
    );
    w.int("scope_regions_folded", None, t.folded_regions);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{Perf, Process, RegionSeries};
    use super::*;

    fn shape(consts: &str, track_async: bool) -> Shape {
        Shape {
            consts: consts.into(),
            track_async,
        }
    }

    fn one_region(name: &str) -> Published {
        let mut s = RegionSeries {
            calls: 3,
            total_ns: 6_500_000,
            await_ns: 1_500_000_000,
            ..RegionSeries::default()
        };
        s.buckets[14] = 2; // (1.78 ms, 3.16 ms]
        s.buckets[FINITE] = 1; // > 100 s (impossible here, but rendered)
        Published {
            version: 1,
            regions: vec![(name.into(), Arc::new(s))],
            perf: None,
            process: Process {
                dropped_calls: 4,
                wait_ns: 2_000_000_000,
                flusher_cpu_ns: 250_000_000,
                buffer_bytes: 65536,
                folded_regions: 0,
            },
        }
    }

    #[test]
    fn escapes_label_values() {
        assert_eq!(escape(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
        assert_eq!(escape("ünï"), "ünï");
        assert_eq!(
            label_pairs([("rank", "0"), ("env", "\"p\"")]),
            r#"rank="0",env="\"p\"""#
        );
    }

    #[test]
    fn writes_every_family_with_labels() {
        let text = render(&one_region("solve \"x\""), &shape(r#"rank="2""#, true));
        let r = r#"region="solve \"x\"",rank="2""#;
        for line in [
            format!("scope_region_calls_total{{{r}}} 3"),
            format!("scope_region_seconds_total{{{r}}} 0.0065"),
            format!("scope_region_await_seconds_total{{{r}}} 1.5"),
            format!("scope_region_duration_seconds_bucket{{{r},le=\"0.00178\"}} 0"),
            format!("scope_region_duration_seconds_bucket{{{r},le=\"0.00316\"}} 2"),
            format!("scope_region_duration_seconds_bucket{{{r},le=\"100\"}} 2"),
            format!("scope_region_duration_seconds_bucket{{{r},le=\"+Inf\"}} 3"),
            format!("scope_region_duration_seconds_sum{{{r}}} 0.0065"),
            format!("scope_region_duration_seconds_count{{{r}}} 3"),
            "scope_dropped_calls_total{rank=\"2\"} 4".into(),
            "scope_backpressure_wait_seconds_total{rank=\"2\"} 2".into(),
            "scope_flusher_cpu_seconds_total{rank=\"2\"} 0.25".into(),
            "scope_buffer_bytes{rank=\"2\"} 65536".into(),
            "scope_regions_folded{rank=\"2\"} 0".into(),
            "# TYPE scope_region_duration_seconds histogram".into(),
            "# TYPE scope_buffer_bytes gauge".into(),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing `{line}` in\n{text}"
            );
        }
        // 33 finite buckets and +Inf.
        assert_eq!(text.matches("_bucket{").count(), FINITE + 1);
    }

    #[test]
    fn no_labels_no_braces_and_await_only_with_tasks() {
        let text = render(&one_region("a"), &shape("", false));
        assert!(text.contains("\nscope_dropped_calls_total 4\n"), "{text}");
        assert!(text.contains("\nscope_region_calls_total{region=\"a\"} 3\n"));
        assert!(!text.contains("await"));
    }

    #[test]
    fn perf_events_get_one_family_each() {
        let mut p = one_region("a");
        p.perf = Some(Perf {
            events: vec!["task-clock".into(), "page-faults".into()],
            values: vec![123, 7],
        });
        let text = render(&p, &shape("", false));
        assert!(text.contains("\nscope_region_perf_task_clock_total{region=\"a\"} 123\n"));
        assert!(text.contains("\nscope_region_perf_page_faults_total{region=\"a\"} 7\n"));
        assert!(text.contains("# TYPE scope_region_perf_page_faults_total counter\n"));
    }

    #[test]
    fn integers_are_decimal() {
        for v in [0, 7, 10, 99, 1_000_000, u64::MAX] {
            let mut s = String::new();
            push_u64(&mut s, v);
            assert_eq!(s, v.to_string());
        }
    }
}
