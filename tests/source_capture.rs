//! Source capture: `rank_region_index/source_texts` holds the source each region covers.

mod common;

use scope_profiler::ScopeLayer;
use tracing_core::{callsite::Callsite, Kind, Level, Metadata};

/// Documented, so the capture starts at the doc comment.
#[tracing::instrument]
fn captured_fn(n: u64) -> u64 {
    let mut s = 0;
    for k in 0..n {
        s += k; // marker: inside captured_fn
    }
    s
}

fn run_block() {
    let before = 1; // marker: before the block
    {
        let _s = tracing::info_span!("captured_block").entered();
        std::hint::black_box(before + 1); // marker: inside the block
    }
    std::hint::black_box(before); // marker: after the block
}

/// A span callsite whose file does not exist anywhere.
struct Missing;
impl Callsite for Missing {
    fn set_interest(&self, _: tracing_core::Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        &MISSING_META
    }
}
static MISSING: Missing = Missing;
static MISSING_META: Metadata<'static> = Metadata::new(
    "missing_source",
    "source_capture",
    Level::INFO,
    Some("no/such/dir/missing.rs"),
    Some(12),
    None,
    tracing_core::field::FieldSet::new(&[], tracing_core::identify_callsite!(&MISSING)),
    Kind::SPAN,
);

fn texts(path: &std::path::Path) -> std::collections::HashMap<String, String> {
    let file = hdf5::File::open(path).unwrap();
    let names = common::read_strings(&file, "region_table/names");
    let ids: Vec<u32> = common::read(&file, "rank_region_index/region_ids");
    let texts = common::read_strings(&file, "rank_region_index/source_texts");
    ids.iter()
        .zip(texts)
        .map(|(&id, t)| (names[id as usize].clone(), t))
        .collect()
}

fn workload() {
    captured_fn(3);
    run_block();
    tracing_core::callsite::register(&MISSING);
    let values = MISSING_META.fields().value_set(&[]);
    tracing::Span::new(&MISSING_META, &values).in_scope(|| ());
}

#[test]
fn sources_of_instrumented_fns_and_span_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("src.h5");
    let (d, guard) = common::dispatch(ScopeLayer::builder().output(&path));
    tracing::dispatcher::with_default(&d, workload);
    guard.finalize().unwrap();
    let t = texts(&path);

    let f = &t["captured_fn"];
    assert!(
        f.starts_with("/// Documented"),
        "the fn item with its docs: {f}"
    );
    assert!(f.contains("#[tracing::instrument]\nfn captured_fn(n: u64) -> u64 {"));
    assert!(f.contains("marker: inside captured_fn"));
    assert!(f.trim_end().ends_with('}'), "{f}");
    assert!(!f.contains("fn run_block"), "only the fn item: {f}");

    let b = &t["captured_block"];
    assert!(b
        .trim_start()
        .starts_with("let _s = tracing::info_span!(\"captured_block\")"));
    assert!(b.contains("marker: inside the block"));
    assert!(
        !b.contains("marker: after the block") && !b.contains("before the block"),
        "from the callsite to the end of the enclosing block: {b}"
    );

    assert_eq!(t["missing_source"], "", "no file, no text (and no error)");
    common::py("scope-profiler", &["inspect", path.to_str().unwrap()]);
}

#[test]
fn capture_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nosrc.h5");
    let (d, guard) = common::dispatch(ScopeLayer::builder().output(&path).capture_source(false));
    tracing::dispatcher::with_default(&d, workload);
    guard.finalize().unwrap();
    let t = texts(&path);
    assert!(t.values().all(String::is_empty), "{t:?}");
    assert!(t.contains_key("captured_fn"));
}

#[test]
fn a_source_root_finds_files_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("no/such/dir")).unwrap();
    let mut text = String::new();
    for k in 1..=20 {
        text += &format!("line {k} {{\n");
    }
    std::fs::write(dir.path().join("no/such/dir/missing.rs"), text).unwrap();
    let path = dir.path().join("root.h5");
    let (d, guard) = common::dispatch(ScopeLayer::builder().output(&path).source_root(dir.path()));
    tracing::dispatcher::with_default(&d, workload);
    guard.finalize().unwrap();
    let t = texts(&path);
    assert!(
        t["missing_source"].starts_with("line 12 {\nline 13 {\n"),
        "{}",
        t["missing_source"]
    );
}

/// A span callsite made at run time, naming `file` (leaked: callsites live for the program).
struct Dynamic(std::sync::OnceLock<&'static Metadata<'static>>);

impl Callsite for Dynamic {
    fn set_interest(&self, _: tracing_core::Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        self.0.get().expect("set at creation")
    }
}

fn span_site(name: &'static str, file: &std::path::Path) -> &'static Metadata<'static> {
    let file: &'static str = Box::leak(file.to_str().unwrap().to_owned().into_boxed_str());
    let cs: &'static Dynamic = Box::leak(Box::new(Dynamic(std::sync::OnceLock::new())));
    let meta: &'static Metadata<'static> = Box::leak(Box::new(Metadata::new(
        name,
        "source_capture",
        Level::INFO,
        Some(file),
        Some(1),
        None,
        tracing_core::field::FieldSet::new(&[], tracing_core::identify_callsite!(cs)),
        Kind::SPAN,
    )));
    cs.0.set(meta).unwrap();
    tracing_core::callsite::register(cs);
    meta
}

/// A FIFO, `/dev/zero`, a 2 MiB file and a link at a callsite's path give no text, and the
/// finalize neither hangs nor reads them; a small regular file beside them is captured.
#[test]
fn only_small_regular_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.rs");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let big = dir.path().join("big.rs");
    std::fs::write(&big, "fn big() {\n".repeat(200_000)).unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "fn secret() {}\n").unwrap();
    let link = dir.path().join("link.rs");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let plain = dir.path().join("plain.rs");
    std::fs::write(&plain, "fn plain() {\n    work();\n}\n").unwrap();
    let sites = [
        span_site("from_fifo", &fifo),
        span_site("from_dev_zero", std::path::Path::new("/dev/zero")),
        span_site("from_big", &big),
        span_site("from_link", &link),
        span_site("from_plain", &plain),
    ];
    let path = dir.path().join("hostile.h5");
    let (d, guard) = common::dispatch(ScopeLayer::builder().output(&path));
    tracing::dispatcher::with_default(&d, || {
        for meta in sites {
            tracing::Span::new(meta, &meta.fields().value_set(&[])).in_scope(|| ());
        }
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(guard.finalize().map(drop)));
    let done = rx.recv_timeout(std::time::Duration::from_secs(120));
    assert!(matches!(done, Ok(Ok(()))), "finalize: {done:?}");
    let t = texts(&path);
    for name in ["from_fifo", "from_dev_zero", "from_big", "from_link"] {
        assert_eq!(t[name], "", "{name}");
    }
    assert!(t["from_plain"].starts_with("fn plain() {"), "{t:?}");
}
