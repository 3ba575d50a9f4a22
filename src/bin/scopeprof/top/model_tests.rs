use super::*;

fn call(start: i64, dur: i64, thread: i64, task: i64, await_ns: i64) -> Call {
    let mut c = Call::default();
    c.start_ns = start;
    c.dur_ns = dur;
    c.thread = thread;
    c.task = task;
    c.await_ns = await_ns;
    c
}

#[test]
fn percentiles_by_nearest_rank() {
    let v: Vec<i64> = (1..=100).collect();
    assert_eq!(percentile(&v, 0.5), Some(50));
    assert_eq!(percentile(&v, 0.99), Some(99));
    assert_eq!(percentile(&v, 1.0), Some(100));
    assert_eq!(percentile(&[7], 0.99), Some(7));
    assert_eq!(percentile(&[], 0.5), None);
    assert_eq!(percentile(&[1, 2, 3], 0.5), Some(2));
}

#[test]
fn window_specs_parse_and_select() {
    assert_eq!(WindowSpec::parse("all"), Ok(WindowSpec::All));
    assert_eq!(
        WindowSpec::parse("10s"),
        Ok(WindowSpec::Last(10_000_000_000))
    );
    assert_eq!(
        WindowSpec::parse("500ms"),
        Ok(WindowSpec::Last(500_000_000))
    );
    assert_eq!(
        WindowSpec::parse("2m"),
        Ok(WindowSpec::Last(120_000_000_000))
    );
    assert_eq!(WindowSpec::parse("3"), Ok(WindowSpec::Last(3_000_000_000)));
    assert!(WindowSpec::parse("10 parsecs").is_err());
    assert!(WindowSpec::parse("-1s").is_err());
    assert!(WindowSpec::parse("0").is_err());
    let last = WindowSpec::Last(10);
    assert_eq!(last.select(None, None), None);
    assert_eq!(
        last.select(Some((0, 100)), None),
        Some(Window {
            start_ns: 90,
            end_ns: 100
        })
    );
    // A window moved back, and one asked past the present (clamped to it).
    assert_eq!(
        last.select(Some((0, 100)), Some(50)),
        Some(Window {
            start_ns: 40,
            end_ns: 50
        })
    );
    assert_eq!(last.select(Some((0, 100)), Some(500)).unwrap().end_ns, 100);
    assert_eq!(
        WindowSpec::All.select(Some((3, 100)), Some(50)),
        Some(Window {
            start_ns: 3,
            end_ns: 100
        })
    );
}

#[test]
fn only_calls_that_ended_in_the_window_count() {
    let w = Window {
        start_ns: 1_000,
        end_ns: 2_000,
    };
    let mut c = Collector::new(w);
    c.add(0, &call(500, 400, 0, -1, 0)); // ends at 900: before
    c.add(0, &call(900, 200, 0, -1, 0)); // ends at 1100: in
    c.add(0, &call(1_500, 500, 0, -1, 0)); // ends at 2000: in (inclusive)
    c.add(0, &call(1_900, 200, 0, -1, 0)); // ends at 2100: after
    c.add(1, &call(1_200, 100, 1, 3, 60));
    let names = vec!["a".to_string(), "b".to_string()];
    let s = c.finish(&names, &[(0, "main".into())], None);
    let a = &s.regions[0];
    assert_eq!((a.name.as_str(), a.calls), ("a", 2));
    assert_eq!(a.p50_ns, Some(200));
    assert_eq!(a.max_ns, Some(500));
    assert_eq!(a.total_ns, 700);
    assert!((a.calls_per_s - 2.0 / 1e-6).abs() < 1.0);
    assert!((a.wall_share - 0.7).abs() < 1e-9);
    assert_eq!(a.open, None);
    let b = &s.regions[1];
    assert_eq!(b.calls, 1);
    assert!((b.await_share.unwrap() - 0.6).abs() < 1e-9);
    // Thread 0: its calls outside tasks cover 1000..1100 (clipped) and 1500..2000.
    assert_eq!(s.threads[0].name, "main");
    assert!((s.threads[0].utilisation - 0.6).abs() < 1e-9);
    assert_eq!(s.threads[1].name, "thread 1");
    assert_eq!(s.tasks.len(), 1);
    assert_eq!(s.tasks[0].root, "b");
    assert_eq!((s.tasks[0].busy_ns, s.tasks[0].await_ns), (40, 60));
}

#[test]
fn histogram_and_slowest_calls() {
    let w = Window {
        start_ns: 0,
        end_ns: i64::MAX / 2,
    };
    let mut c = Collector::new(w);
    for d in 1..=100i64 {
        c.add(0, &call(d * 10, d * 1000, 0, -1, 0));
    }
    let s = c.finish(&["r".to_string()], &[], Some(&[4]));
    let r = &s.regions[0];
    assert_eq!(r.open, Some(4));
    assert_eq!(r.histogram.iter().sum::<u64>(), 100);
    // 1000 ns is in bucket 9 (512..1024), 100_000 ns in bucket 16 (65536..131072).
    assert_eq!(r.histogram[9], 1);
    assert_eq!(r.histogram.len(), 17);
    assert_eq!(r.slowest.len(), SLOWEST);
    assert_eq!(r.slowest[0].dur_ns, 100_000);
    assert_eq!(r.slowest[0].start_ns, 1_000);
    assert!(r.slowest.windows(2).all(|w| w[0].dur_ns >= w[1].dur_ns));
    assert_eq!(r.slowest[SLOWEST - 1].dur_ns, 81_000);
}

#[test]
fn union_of_intervals() {
    assert_eq!(covered(vec![]), 0);
    assert_eq!(covered(vec![(0, 10), (5, 15), (20, 30)]), 25);
    assert_eq!(covered(vec![(20, 30), (0, 100)]), 100);
    let mut v = vec![(5, 6), (0, 2), (1, 3), (3, 4)];
    merge(&mut v);
    assert_eq!(v, [(0, 4), (5, 6)]);
}

#[test]
fn a_busy_threads_intervals_stay_few() {
    let w = Window {
        start_ns: 0,
        end_ns: i64::MAX / 2,
    };
    let mut c = Collector::new(w);
    // Back-to-back calls, each holding a nested one: one interval in the end.
    for k in 0..300_000i64 {
        c.add(0, &call(k * 10, 10, 0, -1, 0));
        c.add(1, &call(k * 10 + 2, 5, 0, -1, 0));
    }
    assert!(
        c.threads[&0].1.len() < COMPACT_AT * 2,
        "{}",
        c.threads[&0].1.len()
    );
    let s = c.finish(&["a".to_string(), "b".to_string()], &[], None);
    assert_eq!(s.threads[0].calls, 600_000);
    let covered_ns = s.threads[0].utilisation * w.len_ns() as f64;
    assert!((covered_ns - 3_000_000.0).abs() < 1.0, "{covered_ns}");
}
