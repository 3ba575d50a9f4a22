//! `scopeprof export`: the Perfetto trace of a Tokio program with known calls, parsed with
//! Perfetto's own protobuf definitions (PyPI `perfetto`), and the Chrome JSON loaded with
//! `json.load`, both checked against the profile file itself.

mod cli_common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cli_common::*;

/// Parses a .pftrace with perfetto_trace_pb2 and prints facts as JSON.
const CHECK_PFTRACE: &str = r#"
import json, sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], 'rb').read())
names, cats, tracks, events = {}, {}, {}, []
for i, p in enumerate(t.packet):
    if p.HasField('interned_data'):
        for n in p.interned_data.event_names: names[n.iid] = n.name
        for c in p.interned_data.event_categories: cats[c.iid] = c.name
    if p.HasField('track_descriptor'):
        d = p.track_descriptor
        tracks[d.uuid] = dict(thread=d.HasField('thread'), tid=d.thread.tid,
                              name=d.thread.thread_name if d.HasField('thread') else d.name)
    if p.HasField('track_event'):
        e = p.track_event
        events.append((p.timestamp, i, e.track_uuid, e.type, names.get(e.name_iid),
                       [cats[c] for c in e.category_iids], list(e.flow_ids)))
time_sorted = all(a[0] <= b[0] for a, b in zip(events, events[1:]))
events.sort(key=lambda e: (e[0], e[1]))
stacks, bad, counts, on_thread, flows = {}, [], {}, {}, {}
for ts, i, tr, ty, name, cs, fl in events:
    if tr not in tracks: bad.append('event on unknown track %d' % tr); continue
    st = stacks.setdefault(tr, [])
    if ty == pb.TrackEvent.TYPE_SLICE_BEGIN:
        if name is None: bad.append('begin without interned name')
        st.append(ts)
        key = cs[0] + ('@thread' if tracks[tr]['thread'] else '@other')
        counts[key] = counts.get(key, 0) + 1
        for f in fl: flows.setdefault(str(f), []).append(tr)
    elif ty == pb.TrackEvent.TYPE_SLICE_END:
        if not st: bad.append('end without begin on %s' % tracks[tr]['name']); continue
        if ts < st.pop(): bad.append('slice ends before it begins')
    else:
        bad.append('unexpected event type %d' % ty)
unclosed = sum(len(s) for s in stacks.values())
threads = sorted([v['tid'], v['name']] for v in tracks.values() if v['thread'])
print(json.dumps(dict(bad=bad, unclosed=unclosed, time_sorted=time_sorted, counts=counts, threads=threads,
                      flows={k: [len(v), len(set(v))] for k, v in flows.items()})))
"#;

/// Loads a Chrome JSON trace with json.load and prints facts as JSON.
const CHECK_CHROME: &str = r#"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d['traceEvents']
counts, flows, threads = {}, {}, []
for e in ev:
    if e['ph'] == 'X':
        counts[e['cat']] = counts.get(e['cat'], 0) + 1
        assert e['dur'] >= 0
    elif e['ph'] in ('s', 't'):
        flows.setdefault(str(e['id']), []).append(e['ph'])
    elif e['ph'] == 'M' and e['name'] == 'thread_name' and e['tid'] < 2**40:
        threads.append([e['tid'], e['args']['name']])
print(json.dumps(dict(counts=counts, flows={k: len(v) for k, v in flows.items()},
                      starts=sum(1 for v in flows.values() if v[0] == 's' and v.count('s') == 1),
                      threads=sorted(threads))))
"#;

/// What the profile file says the traces must hold.
struct Expect {
    calls: usize,
    task_calls: usize,
    polls: usize,
    /// Tasks with more than one poll.
    multi_poll_tasks: usize,
    threads: BTreeSet<(i64, String)>,
}

fn expect(h5: &Path) -> Expect {
    let durations = column(h5, "events/durations");
    let tasks = column(h5, "events/task_ids");
    let poll_tasks = column(h5, "scope_profiler_rs/polls/task_ids");
    let mut per_task: BTreeMap<i64, usize> = BTreeMap::new();
    for &t in poll_tasks.iter().filter(|&&t| t >= 0) {
        *per_task.entry(t).or_default() += 1;
    }
    let tids = column(h5, "thread_table/native_id");
    let names = strings(h5, "thread_table/name");
    Expect {
        calls: durations.len(),
        task_calls: tasks.iter().filter(|&&t| t >= 0).count(),
        polls: poll_tasks.len(),
        multi_poll_tasks: per_task.values().filter(|&&n| n > 1).count(),
        threads: tids.into_iter().zip(names).collect(),
    }
}

fn json_get<'a>(json: &'a str, key: &str) -> &'a str {
    let at = json
        .find(&format!("\"{key}\": "))
        .unwrap_or_else(|| panic!("{key} in {json}"));
    &json[at + key.len() + 4..]
}

/// A number after `"key": ` in a flat JSON object (0 when absent).
fn count(json: &str, key: &str) -> usize {
    match json.find(&format!("\"{key}\": ")) {
        None => 0,
        Some(_) => {
            let rest = json_get(json, key);
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().unwrap()
        }
    }
}

/// `[[tid, "name"], ...]` of the `threads` key.
fn threads(json: &str) -> BTreeSet<(i64, String)> {
    let rest = json_get(json, "threads");
    let end = rest.find("]]").map_or(2, |e| e + 2);
    let list = &rest[..end];
    list.trim_start_matches('[')
        .split("], [")
        .filter(|s| !s.trim_matches(|c| c == '[' || c == ']').is_empty())
        .map(|item| {
            let item = item.trim_matches(|c| c == '[' || c == ']');
            let (tid, name) = item.split_once(", ").expect("pair");
            (tid.parse().unwrap(), name.trim_matches('"').to_owned())
        })
        .collect()
}

/// `{"id": [slices, distinct tracks], ...}` of the `flows` key.
fn flows(json: &str) -> Vec<(usize, usize)> {
    let rest = json_get(json, "flows");
    let end = rest.find('}').unwrap();
    rest[1..end]
        .split("], ")
        .filter(|s| !s.is_empty())
        .map(|s| {
            let v = s.split_once(": [").unwrap().1.trim_end_matches(']');
            let (a, b) = v.split_once(", ").unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

fn check_perfetto(trace: &Path, e: &Expect) {
    let out = python(perfetto_python(), CHECK_PFTRACE, &[trace.to_str().unwrap()]);
    eprintln!("perfetto facts: {out}");
    assert!(out.contains("\"bad\": []"), "{out}");
    // Packets in time order (the trace processor then needs no reordering).
    assert!(out.contains("\"time_sorted\": true"), "{out}");
    assert_eq!(count(&out, "unclosed"), 0, "{out}");
    // Calls outside tasks are on thread tracks, calls in tasks on task tracks.
    assert_eq!(
        count(&out, "call@thread") + count(&out, "call@other"),
        e.calls,
        "{out}"
    );
    assert_eq!(count(&out, "call@other"), e.task_calls, "{out}");
    // Every poll is on the thread track where it ran.
    assert_eq!(count(&out, "poll@thread"), e.polls, "{out}");
    assert_eq!(count(&out, "poll@other"), 0, "{out}");
    // One flow per task with several polls, linking at least two of its polls.
    let f = flows(&out);
    assert_eq!(
        f.iter().filter(|(n, _)| *n > 1).count(),
        e.multi_poll_tasks,
        "{out}"
    );
    assert_eq!(threads(&out), e.threads, "{out}");
}

#[test]
fn perfetto_and_chrome_traces_of_a_tokio_program() {
    let dir = tempfile::tempdir().unwrap();
    let h5 = tokio_profile(dir.path());
    let e = expect(&h5);
    // Known calls: per task a handler, its steps and a query; main_work and the session.
    assert_eq!(e.task_calls as u64, TASKS * (STEPS + 2));
    assert_eq!(e.calls as u64, TASKS * (STEPS + 2) + 2);
    assert!(e.multi_poll_tasks as u64 >= TASKS, "every task awaits");
    // main + the workers that ran tasks: on a loaded machine one worker may run them all.
    assert!(e.threads.len() >= 2, "main + a worker: {:?}", e.threads);

    let trace = dir.path().join("t.pftrace");
    let said = scopeprof_ok(&[
        "export",
        "--format",
        "perfetto",
        h5.to_str().unwrap(),
        "-o",
        trace.to_str().unwrap(),
    ]);
    check_perfetto(&trace, &e);
    // It says what it wrote, and how big.
    let kib = std::fs::metadata(&trace).unwrap().len() as f64 / 1024.0;
    assert_eq!(
        said,
        format!("wrote {} (Perfetto trace, {kib:.1} KiB)\n", trace.display()),
        "{said}"
    );

    // The same through the external sort's spill-and-merge path (runs of 7 items).
    let spilled = dir.path().join("spilled.pftrace");
    scopeprof_ok(&[
        "export",
        h5.to_str().unwrap(),
        "-o",
        spilled.to_str().unwrap(),
        "--sort-run-items",
        "7",
    ]);
    check_perfetto(&spilled, &e);
    assert_eq!(
        std::fs::read(&trace).unwrap(),
        std::fs::read(&spilled).unwrap()
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|d| d.ok())
        .filter(|d| d.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    let json = dir.path().join("t.json");
    scopeprof_ok(&[
        "export",
        "--format",
        "chrome",
        h5.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
    ]);
    let out = python(perfetto_python(), CHECK_CHROME, &[json.to_str().unwrap()]);
    eprintln!("chrome facts: {out}");
    assert_eq!(count(&out, "call"), e.calls, "{out}");
    assert_eq!(count(&out, "poll"), e.polls, "{out}");
    assert_eq!(
        count(&out, "starts"),
        count_flow_ids(&out),
        "each flow starts once: {out}"
    );
    assert!(count_flow_ids(&out) >= e.multi_poll_tasks, "{out}");
    assert_eq!(threads(&out), e.threads, "{out}");
}

fn count_flow_ids(json: &str) -> usize {
    let rest = json_get(json, "flows");
    let end = rest.find('}').unwrap();
    rest[1..end].split(", ").filter(|s| s.contains(':')).count()
}

#[test]
fn reference_files_export_with_their_thread_names() {
    let dir = tempfile::tempdir().unwrap();
    let reference = ref_python();
    let full = reference_file(&reference, dir.path(), true);
    let trace = dir.path().join("ref.pftrace");
    scopeprof_ok(&[
        "export",
        full.to_str().unwrap(),
        "-o",
        trace.to_str().unwrap(),
    ]);
    let out = python(perfetto_python(), CHECK_PFTRACE, &[trace.to_str().unwrap()]);
    assert!(out.contains("\"bad\": []"), "{out}");
    // scope_profiler.session, outer, 2 x inner, worker.
    assert_eq!(count(&out, "call@thread"), 5, "{out}");
    let t = threads(&out);
    let names: BTreeSet<String> = strings(&full, "thread_table/name").into_iter().collect();
    assert_eq!(
        t.iter().map(|(_, n)| n.clone()).collect::<BTreeSet<_>>(),
        names
    );
}

#[test]
fn device_times_go_on_a_gpu_track() {
    let dir = tempfile::tempdir().unwrap();
    let reference = ref_python();
    let full = reference_file(&reference, dir.path(), true);
    // Give every other call a device time of half its duration (-1 = none for the rest).
    let durations = column(&full, "events/durations");
    let gpu: Vec<i64> = durations
        .iter()
        .enumerate()
        .map(|(i, d)| if i % 2 == 0 { d / 2 } else { -1 })
        .collect();
    {
        let f = hdf5::File::open_rw(&full).unwrap();
        f.new_dataset_builder()
            .with_data(&gpu)
            .create("events/gpu_durations")
            .unwrap();
    }
    let trace = dir.path().join("gpu.pftrace");
    scopeprof_ok(&[
        "export",
        full.to_str().unwrap(),
        "-o",
        trace.to_str().unwrap(),
    ]);
    let out = python(perfetto_python(), CHECK_PFTRACE, &[trace.to_str().unwrap()]);
    assert!(out.contains("\"bad\": []"), "{out}");
    assert_eq!(
        count(&out, "gpu@other"),
        gpu.iter().filter(|&&g| g >= 0).count(),
        "{out}"
    );
    assert_eq!(count(&out, "call@thread"), durations.len(), "{out}");

    let json = dir.path().join("gpu.json");
    scopeprof_ok(&[
        "export",
        "--format",
        "chrome",
        full.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
    ]);
    let out = python(perfetto_python(), CHECK_CHROME, &[json.to_str().unwrap()]);
    assert_eq!(
        count(&out, "gpu"),
        gpu.iter().filter(|&&g| g >= 0).count(),
        "{out}"
    );
}
