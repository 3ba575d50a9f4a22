use super::*;

#[test]
fn every_supported_name_parses() {
    for name in SUPPORTED {
        assert!(Kind::parse(name).is_some(), "{name}");
    }
    assert!(Kind::parse("cpu-cycles").is_none());
}

#[test]
fn group_read_returns_growing_values() {
    let kinds = [
        Kind::Sw(Software::TASK_CLOCK),
        Kind::Sw(Software::PAGE_FAULTS),
    ];
    let c = Counters::open(&kinds).expect("software counters open");
    assert!(
        matches!(c, Counters::Group { .. }),
        "software events form a group"
    );
    let (mut a, mut b) = ([0; MAX_EVENTS], [0; MAX_EVENTS]);
    let mut shared = false;
    c.read(2, &mut a, &mut shared).unwrap();
    // Fresh pages, written from user space: 1 024 faults at least (a `Vec` may be served
    // from memory another test thread already touched). This test used to read 0 faults
    // in some runs because the group's members were created disabled (see `open`): the
    // sink itself then counted nothing for every event but the first.
    let len = 4 << 20;
    // SAFETY: an anonymous private mapping of `len` bytes; checked, written in bounds,
    // unmapped below.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        for page in (0..len).step_by(4096) {
            std::ptr::write_volatile(p.cast::<u8>().add(page), 1);
        }
        libc::munmap(p, len);
    }
    c.read(2, &mut b, &mut shared).unwrap();
    assert!(b[0] > a[0], "task-clock grows: {a:?} -> {b:?}");
    assert!(b[1] > a[1], "page faults grow: {a:?} -> {b:?}");
    assert!(!shared);
}
