//! GPU check for the `cuda` and `nvtx` sinks, for a machine with an NVIDIA GPU and driver:
//! times known host-to-device copies inside spans and checks the CUDA event times the profiler
//! reports against what the hardware can plausibly do. Prints one `PASS`/`FAIL` line per check
//! and exits non-zero if any check fails. Run it with `scripts/gpu-check.sh` (or
//! `cargo run --release --example gpu_check --features cuda,nvtx [-- OUTPUT.h5]`).
//!
//! The NVTX ranges (domain `scope-profiler`) are only visible to a tool: run the example under
//! `nsys profile --trace=nvtx,cuda` to see them next to the copies.

#[cfg(not(all(feature = "cuda", feature = "nvtx")))]
fn main() {
    eprintln!("gpu_check needs the cuda and nvtx features: cargo run --example gpu_check --features cuda,nvtx");
    std::process::exit(2);
}

#[cfg(all(feature = "cuda", feature = "nvtx"))]
fn main() {
    std::process::exit(if check::run() { 0 } else { 1 });
}

#[cfg(all(feature = "cuda", feature = "nvtx"))]
mod check {
    use cudarc::driver::{result, sys};
    use scope_profiler::{RegionStats, Report, ScopeLayer};
    use tracing::info_span;
    use tracing_subscriber::prelude::*;

    const BYTES: usize = 256 << 20;
    const REPS: u64 = 5;
    /// Plausible host-to-device bandwidth from pinned memory, GB/s: PCIe 3 x8 at the low end,
    /// NVLink-C2C (Grace Hopper) at the high end.
    const BW_RANGE: (f64, f64) = (1.0, 1000.0);

    struct Checks(bool);

    impl Checks {
        fn check(&mut self, name: &str, ok: bool, detail: String) {
            println!("{} {name}: {detail}", if ok { "PASS" } else { "FAIL" });
            self.0 &= ok;
        }
    }

    fn region<'a>(r: &'a Report, name: &str) -> &'a RegionStats {
        r.region(name)
            .unwrap_or_else(|| panic!("no region {name} in the report"))
    }

    fn gbps(ns: f64) -> f64 {
        BYTES as f64 / ns
    }

    fn e(what: &'static str) -> impl Fn(result::DriverError) -> String {
        move |err| format!("{what}: {err:?}")
    }

    /// Device and pinned host buffers of `BYTES`, made in the primary context of device 0,
    /// which is left current (as the CUDA runtime would), so the profiler uses it too.
    fn setup() -> Result<(sys::CUdeviceptr, &'static mut [u8]), String> {
        // SAFETY: only dlopens (and closes) the names cudarc would load; cudarc panics on any
        // driver call without the library, so look first.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver library (libcuda.so) found".into());
        }
        result::init().map_err(e("cuInit"))?;
        let dev = result::device::get(0).map_err(e("cuDeviceGet"))?;
        let name = result::device::get_name(dev).map_err(e("cuDeviceGetName"))?;
        println!("INFO device 0: {name}");
        // SAFETY: `dev` comes from cuDeviceGet; the context stays retained until exit.
        let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(e("retain"))?;
        // SAFETY: `ctx` was just retained.
        unsafe { result::ctx::set_current(ctx) }.map_err(e("cuCtxSetCurrent"))?;
        // SAFETY: plain allocations of BYTES; the host memory is initialized right below and
        // both live until the process exits.
        let (dptr, host) = unsafe {
            let dptr = result::malloc_sync(BYTES).map_err(e("cuMemAlloc"))?;
            let h = result::malloc_host(BYTES, 0).map_err(e("cuMemHostAlloc"))?;
            std::ptr::write_bytes(h.cast::<u8>(), 0x5a, BYTES);
            (dptr, std::slice::from_raw_parts_mut(h.cast::<u8>(), BYTES))
        };
        // Warm-up copy, outside any span.
        // SAFETY: both buffers are BYTES long and alive.
        unsafe { result::memcpy_htod_sync(dptr, host) }.map_err(e("cuMemcpyHtoD"))?;
        Ok((dptr, host))
    }

    pub(super) fn run() -> bool {
        let mut c = Checks(true);
        let out = std::env::args_os()
            .nth(1)
            .map(Into::into)
            .unwrap_or_else(|| std::env::temp_dir().join("gpu_check.h5"));
        let (dptr, host) = match setup() {
            Ok(b) => b,
            Err(e) => {
                c.check("cuda setup", false, e);
                return false;
            }
        };
        let built = ScopeLayer::builder()
            .cuda_timing(true)
            .nvtx(true)
            .output(&out)
            .summary(true)
            .build();
        let (layer, guard) = match built {
            Ok(b) => b,
            Err(e) => {
                c.check("build with cuda_timing + nvtx", false, e.to_string());
                return false;
            }
        };
        c.check("build with cuda_timing + nvtx", true, "ok".into());
        let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let null = std::ptr::null_mut();
        tracing::dispatcher::with_default(&d, || {
            for _ in 0..REPS {
                // Enqueue only: the CPU span ends long before the copy does.
                info_span!("htod_async").in_scope(|| {
                    // SAFETY: both buffers are BYTES long and alive until exit.
                    unsafe { result::memcpy_htod_async(dptr, &host[..], null) }.unwrap();
                });
                // SAFETY: the default stream of the current context.
                unsafe { result::stream::synchronize(null) }.unwrap();
                info_span!("htod_sync").in_scope(|| {
                    // SAFETY: as above.
                    unsafe { result::memcpy_htod_sync(dptr, &host[..]) }.unwrap();
                });
            }
            for _ in 0..20 {
                info_span!("empty").in_scope(|| ());
            }
        });
        let r = match guard.finalize() {
            Ok(r) => r,
            Err(e) => {
                c.check("finalize", false, e.to_string());
                return false;
            }
        };
        c.check(
            "no sink warnings",
            r.warnings().is_empty(),
            format!("{:?}", r.warnings()),
        );
        for name in ["htod_async", "htod_sync"] {
            let s = region(&r, name);
            let gpu_ns = s.gpu_total_ns as f64 / s.gpu_calls.max(1) as f64;
            let bw = gbps(gpu_ns);
            c.check(
                &format!("{name}: every call has a device time"),
                s.calls == REPS && s.gpu_calls == REPS,
                format!("calls {} gpu_calls {}", s.calls, s.gpu_calls),
            );
            c.check(
                &format!("{name}: 256 MiB copy bandwidth plausible"),
                gpu_ns > 0.0 && (BW_RANGE.0..=BW_RANGE.1).contains(&bw),
                format!("device {:.3} ms/copy = {bw:.1} GB/s", gpu_ns / 1e6),
            );
        }
        let (a, s) = (region(&r, "htod_async"), region(&r, "htod_sync"));
        let gpu_sync = s.gpu_total_ns as f64 / REPS as f64;
        c.check(
            "htod_sync: CPU time brackets the device time",
            s.mean_ns >= 0.9 * gpu_sync,
            format!(
                "cpu {:.3} ms, gpu {:.3} ms",
                s.mean_ns / 1e6,
                gpu_sync / 1e6
            ),
        );
        let gpu_async = a.gpu_total_ns as f64 / REPS as f64;
        c.check(
            "htod_async: device time of async and sync copies agree (within 2x)",
            gpu_async > 0.5 * gpu_sync && gpu_async < 2.0 * gpu_sync,
            format!("{:.3} vs {:.3} ms", gpu_async / 1e6, gpu_sync / 1e6),
        );
        let e = region(&r, "empty");
        let empty_us = e.gpu_total_ns as f64 / e.gpu_calls.max(1) as f64 / 1e3;
        c.check(
            "empty: device time of an empty span is small",
            e.gpu_calls == 20 && empty_us < 100.0,
            format!("gpu_calls {}, {empty_us:.1} us/call", e.gpu_calls),
        );
        match read_gpu_durations(&out) {
            Ok(g) => {
                let measured = g.iter().filter(|&&v| v >= 0).count() as u64;
                c.check(
                    "file: events/gpu_durations has every measured call",
                    measured == 2 * REPS + 20,
                    format!("{measured} values >= 0 of {} in {}", g.len(), out.display()),
                );
            }
            Err(e) => c.check("file: events/gpu_durations", false, e),
        }
        sync_on_exit(&mut c, dptr, host);
        println!("INFO NVTX ranges went to domain \"scope-profiler\"; run under `nsys profile --trace=nvtx,cuda` to see them");
        c.0
    }

    /// With `cuda_sync_on_exit` the stream is synchronized when a span exits: enclosing spans
    /// then include the device work (the span's own CPU end is read before the wait).
    fn sync_on_exit(c: &mut Checks, dptr: sys::CUdeviceptr, host: &[u8]) {
        let built = ScopeLayer::builder()
            .cuda_timing(true)
            .cuda_sync_on_exit(true)
            .no_output()
            .summary(false)
            .build();
        let (layer, guard) = match built {
            Ok(b) => b,
            Err(e) => return c.check("build with cuda_sync_on_exit", false, e.to_string()),
        };
        let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        tracing::dispatcher::with_default(&d, || {
            for _ in 0..REPS {
                info_span!("synced_outer").in_scope(|| {
                    info_span!("synced_copy").in_scope(|| {
                        // SAFETY: both buffers are BYTES long and alive until exit.
                        unsafe { result::memcpy_htod_async(dptr, host, std::ptr::null_mut()) }
                            .unwrap();
                    })
                });
            }
        });
        let r = match guard.finalize() {
            Ok(r) => r,
            Err(e) => return c.check("finalize (sync_on_exit)", false, e.to_string()),
        };
        let (outer, copy) = (region(&r, "synced_outer"), region(&r, "synced_copy"));
        let gpu = copy.gpu_total_ns as f64 / copy.gpu_calls.max(1) as f64;
        c.check(
            "sync_on_exit: the enclosing span includes the device work",
            copy.gpu_calls == REPS && outer.mean_ns >= 0.9 * gpu,
            format!(
                "outer cpu {:.3} ms, copy gpu {:.3} ms",
                outer.mean_ns / 1e6,
                gpu / 1e6
            ),
        );
        println!(
            "INFO sync_on_exit: the copy span's own cpu time is {:.3} ms (the layer reads the \
             clock before the sinks' exit)",
            copy.mean_ns / 1e6
        );
    }

    fn read_gpu_durations(path: &std::path::Path) -> Result<Vec<i64>, String> {
        let f = hdf5::File::open(path).map_err(|e| e.to_string())?;
        let ds = f
            .dataset("events/gpu_durations")
            .map_err(|e| e.to_string())?;
        ds.read_raw::<i64>().map_err(|e| e.to_string())
    }
}
