use super::*;
use crate::top::model::Collector;
use scope_profiler::read::Call;

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn snapshot() -> Snapshot {
    let w = Window {
        start_ns: 0,
        end_ns: 1_000,
    };
    let mut col = Collector::new(w);
    for (region, dur, n) in [(0u32, 10i64, 5), (1, 300, 1), (2, 20, 3)] {
        for _ in 0..n {
            let mut c = Call::default();
            c.start_ns = 100;
            c.dur_ns = dur;
            col.add(region, &c);
        }
    }
    let names = ["parse", "solve", "send"].map(String::from);
    col.finish(&names, &[], None)
}

#[test]
fn sorts_by_any_column_and_filters_as_you_type() {
    let snap = snapshot();
    let mut app = App::new(WindowSpec::Last(1_000));
    let names =
        |app: &App| -> Vec<String> { app.rows(&snap).iter().map(|r| r.name.clone()).collect() };
    assert_eq!(
        names(&app),
        ["parse", "send", "solve"],
        "calls/s, descending"
    );
    app.key(key(KeyCode::Char('s')), None, &[]); // wall%
    assert_eq!(names(&app), ["solve", "send", "parse"]);
    app.key(key(KeyCode::Char('r')), None, &[]);
    assert_eq!(names(&app), ["parse", "send", "solve"]);
    for _ in 0..6 {
        app.key(key(KeyCode::Char('s')), None, &[]);
    }
    assert_eq!(COLUMNS[app.sort], "region");
    assert_eq!(names(&app), ["parse", "send", "solve"]);
    app.key(key(KeyCode::Char('/')), None, &[]);
    for c in "SO".chars() {
        app.key(key(KeyCode::Char(c)), None, &[]);
    }
    assert_eq!(names(&app), ["solve"], "case-insensitive");
    app.key(key(KeyCode::Backspace), None, &[]);
    assert_eq!(names(&app), ["parse", "send", "solve"]);
    app.key(key(KeyCode::Backspace), None, &[]);
    app.key(key(KeyCode::Char('n')), None, &[]);
    assert_eq!(names(&app), ["send"]);
    app.key(key(KeyCode::Backspace), None, &[]);
    app.key(key(KeyCode::Char('o')), None, &[]);
    assert_eq!(names(&app), ["solve"]);
    app.key(key(KeyCode::Enter), None, &[]);
    let rows = app.rows(&snap);
    app.key(key(KeyCode::Enter), None, &rows);
    assert_eq!((app.view, app.detail), (View::Detail, Some(1)));
    app.key(key(KeyCode::Esc), None, &rows);
    assert_eq!(app.view, View::Regions);
    app.key(key(KeyCode::Char('q')), None, &rows);
    assert!(app.quit);
}

#[test]
fn time_controls_pause_move_and_resize() {
    let span = Some((0, 100_000_000_000)); // 100 s recorded
    let mut app = App::new(WindowSpec::Last(10_000_000_000));
    let w = app.window(span).unwrap();
    assert_eq!((w.start_ns, w.end_ns), (90_000_000_000, 100_000_000_000));
    app.key(key(KeyCode::Left), span, &[]);
    assert!(!app.follow);
    let w = app.window(span).unwrap();
    assert_eq!((w.start_ns, w.end_ns), (85_000_000_000, 95_000_000_000));
    // Paused: more recorded, the window stays.
    let w2 = app.window(Some((0, 200_000_000_000))).unwrap();
    assert_eq!(w2, w);
    app.key(key(KeyCode::Char('-')), span, &[]);
    let w = app.window(span).unwrap();
    assert_eq!(w.len_ns(), 5_000_000_000);
    app.key(key(KeyCode::Char('+')), span, &[]);
    app.key(key(KeyCode::Char('+')), span, &[]);
    assert_eq!(app.window(span).unwrap().len_ns(), 20_000_000_000);
    app.key(key(KeyCode::Home), span, &[]);
    let w = app.window(span).unwrap();
    assert_eq!((w.start_ns, w.end_ns), (0, 20_000_000_000));
    // Forward past the present follows it again.
    for _ in 0..20 {
        app.key(key(KeyCode::Right), span, &[]);
    }
    assert!(app.follow);
    app.key(key(KeyCode::Char(' ')), span, &[]);
    assert!(!app.follow);
    app.key(key(KeyCode::Char('f')), span, &[]);
    assert!(app.follow);
    app.key(key(KeyCode::Char('a')), span, &[]);
    assert_eq!(app.window(span).unwrap().len_ns(), 100_000_000_000);
}
