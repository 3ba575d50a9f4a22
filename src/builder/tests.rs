use super::*;

#[test]
fn thread_lanes_follow_task_lanes_in_any_call_order() {
    for b in [
        Builder::default().track_async(true).track_threads(false),
        Builder::default().track_threads(false).track_async(true),
    ] {
        let c = b.no_output().config.finish().unwrap();
        assert!(c.track_async && c.track_threads);
    }
    let c = Builder::default()
        .track_async(true)
        .track_async(false)
        .no_output()
        .config
        .finish()
        .unwrap();
    assert!(
        !c.track_async && !c.track_threads,
        "switching async off leaves threads as set"
    );
}

#[test]
fn invalid_options_are_errors() {
    let e = Builder::default()
        .no_output()
        .spool_sync_interval(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("spool_sync_interval"), "{e}");
    let e = Builder::default().output("/dev/null").build().unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let e = Builder::default()
        .no_output()
        .buffer_budget(1000)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("buffer_budget"), "{e}");
    let e = Builder::default().no_output().gzip(12).build().unwrap_err();
    assert!(e.to_string().contains("gzip"), "{e}");
    let e = Builder::default()
        .no_output()
        .cuda_sync_on_exit(true)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("cuda_timing"), "{e}");
}

#[test]
fn live_sets_a_200_ms_spool_sync_and_off_restores_the_default() {
    let interval = |b: Builder| b.no_output().config.finish().unwrap().flush_interval;
    let default = interval(Builder::default());
    assert_eq!(default, Duration::from_secs(1));
    assert_eq!(
        interval(Builder::default().live(true)),
        Duration::from_millis(200)
    );
    assert_eq!(interval(Builder::default().live(true).live(false)), default);
}
