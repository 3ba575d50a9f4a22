//! `scopeprof report` in a real browser: Debian's headless Chromium opens the pages written
//! for a Tokio profile (polls, task lanes), a base/candidate pair (the diff table) and a file
//! written by the Python package. For each page: it renders, the browser's console is empty,
//! a screenshot has many distinct colors, and the region names are in the dumped DOM.
//! Screenshots go to a temporary directory, never the repository.

mod cli_common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_common::workload::{self, Workload};
use cli_common::{python_package_profile, scopeprof_ok, tokio_profile};

/// Chromium, installed by scripts/install-deps.sh (a test that needs it fails without it).
fn chromium() -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join("chromium");
        if p.is_file() {
            return p;
        }
    }
    panic!("chromium is not installed: run scripts/install-deps.sh (apt-get install chromium)");
}

/// Runs headless Chromium on `page` with `extra` flags and a fresh profile directory;
/// returns (stdout, stderr). Killed after 90 s.
fn browse(page: &Path, extra: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut stdout = String::new();
    let _ = out.read_to_string(&mut stdout);
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (stdout, reader.join().unwrap())
}

/// The page's console messages in Chromium's log (`INFO:CONSOLE...] "message", source: ...`).
fn console(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// The distinct RGB colors of an 8-bit RGB or RGBA PNG (enough of a decoder for
/// Chromium's screenshots: zlib-inflated IDAT data and the five row filters).
fn png_colors(path: &Path) -> usize {
    let data = std::fs::read(path).unwrap();
    assert_eq!(&data[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let (mut at, mut idat) = (8, Vec::new());
    let (mut width, mut height, mut channels) = (0usize, 0usize, 0usize);
    while at + 8 <= data.len() {
        let len = u32::from_be_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        let kind = &data[at + 4..at + 8];
        let body = &data[at + 8..at + 8 + len];
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes(body[0..4].try_into().unwrap()) as usize;
                height = u32::from_be_bytes(body[4..8].try_into().unwrap()) as usize;
                assert_eq!(body[8], 8, "bit depth");
                channels = match body[9] {
                    2 => 3,
                    6 => 4,
                    t => panic!("PNG color type {t}"),
                };
            }
            b"IDAT" => idat.extend_from_slice(body),
            _ => {}
        }
        at += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = width * channels;
    let mut prev = vec![0u8; stride];
    let mut colors = std::collections::HashSet::new();
    for y in 0..height {
        let line = &raw[y * (stride + 1)..(y + 1) * (stride + 1)];
        let mut cur = line[1..].to_vec();
        for i in 0..stride {
            let a = if i >= channels { cur[i - channels] } else { 0 };
            let b = prev[i];
            let c = if i >= channels { prev[i - channels] } else { 0 };
            let add = match line[0] {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("PNG filter {f}"),
            };
            cur[i] = cur[i].wrapping_add(add);
        }
        for px in cur.chunks(channels) {
            colors.insert((px[0], px[1], px[2]));
        }
        prev = cur;
    }
    colors.len()
}

/// Opens `page` twice (DOM dump, screenshot) and checks it; returns the DOM.
fn check_in_browser(page: &Path, names: &[&str], shots: &Path) -> String {
    let html = std::fs::read_to_string(page).unwrap();
    // Self-contained: nothing to fetch.
    for needle in ["http://", "https://", " src=", "@import", "url("] {
        assert!(
            !html.contains(needle),
            "{} contains {needle:?}",
            page.display()
        );
    }
    let (dom, log) = browse(page, &["--dump-dom"]);
    assert!(
        dom.contains("<svg"),
        "no SVG rendered in {}: {dom:.300}",
        page.display()
    );
    assert!(
        console(&log).is_empty(),
        "console messages: {:?}",
        console(&log)
    );
    for n in names {
        assert!(
            dom.contains(n),
            "region {n} not in the DOM of {}",
            page.display()
        );
    }
    let shot = shots.join(page.with_extension("png").file_name().unwrap());
    let (_, log) = browse(
        page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1400,1800",
            "--hide-scrollbars",
        ],
    );
    assert!(
        console(&log).is_empty(),
        "console messages: {:?}",
        console(&log)
    );
    let colors = png_colors(&shot);
    assert!(
        colors > 40,
        "{} distinct colors in the screenshot of {}",
        colors,
        page.display()
    );
    dom
}

#[test]
fn report_pages_render_in_chromium_with_no_console_messages() {
    let dir = tempfile::tempdir().unwrap();
    let shots = tempfile::tempdir().unwrap();
    // The console capture works: a page with an error is caught.
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><script>console.error('boom'); nope();</script></body></html>",
    )
    .unwrap();
    let (_, log) = browse(&bad, &["--dump-dom"]);
    let said = console(&log);
    assert!(said.iter().any(|l| l.contains("boom")), "{log}");
    assert!(
        said.iter().any(|l| l.contains("nope is not defined")),
        "{log}"
    );

    // A Tokio program: task lanes and polls.
    let tokio = tokio_profile(dir.path());
    let page = dir.path().join("tokio.html");
    scopeprof_ok(&[
        "report",
        tokio.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let dom = check_in_browser(
        &page,
        &["handler", "step", "query", "main_work"],
        shots.path(),
    );
    assert!(dom.contains("Slowest calls: polls and await time"));
    assert!(
        dom.contains("class=\"busy\""),
        "no poll drawn for the slowest calls"
    );
    assert!(dom.contains("Task-"), "no task lane in the timeline");

    // A base/candidate pair: the diff table, colored.
    let base = dir.path().join("base.h5");
    let cand = dir.path().join("cand.h5");
    let w = Workload {
        calls: 200,
        ..Workload::default()
    };
    workload::profile_interleaved(&[
        (base.clone(), w),
        (
            cand.clone(),
            Workload {
                kernel_scale: 1.5,
                ..w
            },
        ),
    ])
    .unwrap();
    let page = dir.path().join("diff.html");
    scopeprof_ok(&[
        "report",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let dom = check_in_browser(&page, &["kernel", "steady", "rare"], shots.path());
    assert!(dom.contains("Diff against the base"));
    assert!(
        dom.contains("class=\"up2\"") || dom.contains("class=\"up3\""),
        "kernel's +50% is not red"
    );

    // A file written by the Python package.
    let py = python_package_profile(dir.path(), "python.h5", false, 2000);
    let page = dir.path().join("python.html");
    scopeprof_ok(&["report", py.to_str().unwrap(), "-o", page.to_str().unwrap()]);
    let dom = check_in_browser(&page, &["solve", "inner", "setup"], shots.path());
    assert!(
        dom.contains("no per-poll records"),
        "the page must say polls are unknown"
    );
}

#[test]
fn a_million_calls_make_a_small_page_that_says_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("large.h5");
    let gen = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gen-large-profile.py");
    cli_common::python(
        &cli_common::ref_python(),
        &format!(
            "import runpy, sys; sys.argv = ['gen', {:?}, '1000000', '8']; \
             runpy.run_path({gen:?}, run_name='__main__')",
            file.display().to_string()
        ),
        &[],
    );
    let page = dir.path().join("large.html");
    scopeprof_ok(&[
        "report",
        file.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size <= 5 << 20, "{size} bytes");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("1000000 calls, too many to draw: this is the busiest window"),
        "no window note"
    );
    assert!(html.contains(">request<") && html.contains(">query<"));
    let (dom, log) = browse(&page, &["--dump-dom"]);
    assert!(
        console(&log).is_empty(),
        "console messages: {:?}",
        console(&log)
    );
    assert!(dom.contains("worker-7"), "the lanes are drawn");
}

/// The share of the flamegraph's `frame` in a report page (`<title>frame: .. (12.3%), ..`);
/// 0 when it is too narrow to be drawn.
fn flame_share(html: &str, frame: &str) -> f64 {
    let Some(at) = html.find(&format!("<title>{frame}: ")) else {
        return 0.0;
    };
    let rest = &html[at..];
    let open = rest.find('(').unwrap();
    let close = rest.find("%)").unwrap();
    rest[open + 1..close].parse().unwrap()
}

/// The page's flamegraph weighs busy time (the polls) by default: the handlers' sync `step`
/// calls are a larger share of it than of the wall-clock one (`--wall`), where the sleeping
/// handlers take the width.
#[test]
fn the_flamegraph_weighs_busy_time_unless_wall() {
    let dir = tempfile::tempdir().unwrap();
    let tokio = tokio_profile(dir.path());
    let page = |extra: &[&str]| {
        let out = dir.path().join("page.html");
        let mut args = vec![
            "report",
            tokio.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        scopeprof_ok(&args);
        std::fs::read_to_string(&out).unwrap()
    };
    let busy = page(&[]);
    let wall = page(&["--wall"]);
    assert!(
        busy.contains("Icicle flamegraph of busy time"),
        "{busy:.500}"
    );
    assert!(
        wall.contains("Icicle flamegraph of wall-clock time"),
        "{wall:.500}"
    );
    let (b, w) = (flame_share(&busy, "step"), flame_share(&wall, "step"));
    assert!(
        b > 2.0 * w,
        "step: {b}% of busy time, {w}% of wall-clock time"
    );
}
