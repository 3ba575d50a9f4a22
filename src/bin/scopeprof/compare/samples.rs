//! What `diff` and `check` know of one file: per region (pooled by name over the selected
//! ranks, as the Python summary pools them) the exact calls, total, min and max, and a
//! uniform sample of its per-call durations.
//!
//! The sample is a reservoir (Vitter's algorithm R, seeded by the region name, so a file always
//! gives the same sample) of at most [`REGION_CAP`] calls per region and [`FILE_CAP`] per
//! file: a 50 M-call file is read in one streaming pass over `events/durations` with at most
//! 16 MiB of samples, and every percentile is exact whenever a region has no more calls than
//! its cap. Aggregate-layout files have no per-call data: their regions carry count, total,
//! min and max only.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scope_profiler::read::{Profile, StorageLayout};

use super::stats::{quantile_sorted, seed, Rng};
use super::Select;
use crate::supervise::Heartbeat;

/// Largest sample of one region in one file.
pub(crate) const REGION_CAP: usize = 100_000;
/// Largest sample of all regions of one file together (the largest regions share what the
/// others leave).
pub(crate) const FILE_CAP: usize = 2_000_000;

/// Calls read per HDF5 hyperslab.
const CHUNK: usize = 1 << 16;

/// One region of one file.
#[derive(Clone, Debug)]
pub(crate) struct Region {
    pub(crate) name: String,
    pub(crate) calls: u64,
    /// Sum of durations (ns).
    pub(crate) total_ns: f64,
    pub(crate) min_ns: i64,
    pub(crate) max_ns: i64,
    /// A uniform sample of the per-call durations (ns), sorted; `None` in aggregate files.
    pub(crate) sample: Option<Vec<f64>>,
}

impl Region {
    /// Mean duration (ns).
    pub(crate) fn mean_ns(&self) -> f64 {
        self.total_ns / self.calls.max(1) as f64
    }

    /// Whether the sample holds fewer calls than the region (percentiles are estimates).
    pub(crate) fn sampled(&self) -> bool {
        self.sample
            .as_ref()
            .is_some_and(|s| (s.len() as u64) < self.calls)
    }

    /// The `p`-quantile of the durations (ns), when the file has per-call data.
    pub(crate) fn quantile(&self, p: f64) -> Option<f64> {
        self.sample.as_deref().map(|s| quantile_sorted(s, p))
    }
}

/// One file, read.
#[derive(Clone, Debug)]
pub(crate) struct FileData {
    pub(crate) path: PathBuf,
    /// `label - path`, or the path.
    pub(crate) title: String,
    /// Whether the file has per-call durations (columnar layout).
    pub(crate) per_call: bool,
    /// Regions with at least one call, in file order.
    pub(crate) regions: Vec<Region>,
}

impl FileData {
    pub(crate) fn region(&self, name: &str) -> Option<&Region> {
        self.regions.iter().find(|r| r.name == name)
    }

    /// Whether any region's sample is smaller than its calls.
    pub(crate) fn sampled(&self) -> bool {
        self.regions.iter().any(Region::sampled)
    }
}

/// A reservoir of at most `cap` values.
#[derive(Debug)]
struct Reservoir {
    cap: usize,
    seen: u64,
    values: Vec<f64>,
    rng: Rng,
}

impl Reservoir {
    fn new(cap: usize, seed: u64) -> Reservoir {
        Reservoir {
            cap,
            seen: 0,
            values: Vec::new(),
            rng: Rng::new(seed),
        }
    }

    /// Algorithm R: the i-th value replaces a random slot with probability cap / i.
    fn push(&mut self, x: f64) {
        self.seen += 1;
        if self.values.len() < self.cap {
            self.values.push(x);
        } else {
            let j = self.rng.below(self.seen) as usize;
            if j < self.cap {
                self.values[j] = x;
            }
        }
    }
}

/// The per-region caps: min(calls, [`REGION_CAP`], L) with the level L chosen so the caps
/// add up to at most [`FILE_CAP`].
fn caps(counts: &[u64]) -> Vec<usize> {
    let want = |level: u64| -> u64 { counts.iter().map(|&c| c.min(level)).sum() };
    let mut level = REGION_CAP as u64;
    if want(level) > FILE_CAP as u64 {
        let (mut lo, mut hi) = (1u64, level);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if want(mid) <= FILE_CAP as u64 {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        level = lo;
    }
    counts.iter().map(|&c| c.min(level) as usize).collect()
}

/// Regions by name, in order of first appearance.
#[derive(Default)]
struct Regions {
    by_name: HashMap<String, usize>,
    list: Vec<Region>,
}

impl Regions {
    /// The index of region `name` (created empty on first use).
    fn slot(&mut self, name: &str) -> usize {
        let list = &mut self.list;
        *self.by_name.entry(name.to_owned()).or_insert_with(|| {
            list.push(Region {
                name: name.to_owned(),
                calls: 0,
                total_ns: 0.0,
                min_ns: i64::MAX,
                max_ns: 0,
                sample: None,
            });
            list.len() - 1
        })
    }
}

/// Reads `path`: the regions `select` keeps, with a sample of each one's calls.
pub(crate) fn read(path: &Path, select: &Select) -> Result<FileData, String> {
    let p = Profile::open(path).map_err(|e| e.to_string())?;
    let title = p.label().map_or_else(
        || path.display().to_string(),
        |l| format!("{l} - {}", path.display()),
    );
    let per_call = p.layout() != StorageLayout::Aggregate;
    let regions = if per_call {
        columnar(&p, select)?
    } else {
        aggregate(&p, select)
    };
    Ok(FileData {
        path: path.to_path_buf(),
        title,
        per_call,
        regions,
    })
}

/// The regions of an aggregate file (no samples).
fn aggregate(p: &Profile, select: &Select) -> Vec<Region> {
    let mut regions = Regions::default();
    for a in p.aggregates().iter().filter(|a| a.count > 0) {
        let name = p.region_name(a.region);
        if !(select.rank(a.rank) && select.name(name)) {
            continue;
        }
        let k = regions.slot(name);
        let r = &mut regions.list[k];
        r.calls += a.count;
        r.total_ns += a.total_ns.max(0) as f64;
        r.min_ns = r.min_ns.min(a.min_ns.max(0));
        r.max_ns = r.max_ns.max(a.max_ns.max(0));
    }
    regions.list
}

/// The regions of a columnar file, each with its reservoir of durations, in one pass.
fn columnar(p: &Profile, select: &Select) -> Result<Vec<Region>, String> {
    // Counts per name first (from the index), to share the sample budget.
    let mut regions = Regions::default();
    let mut counts: Vec<u64> = Vec::new();
    let mut row_of: HashMap<(u32, u32, u64), usize> = HashMap::new();
    for row in p.rows().iter().filter(|r| r.count > 0) {
        let name = p.region_name(row.region);
        if !(select.rank(row.rank) && select.name(name)) {
            continue;
        }
        let k = regions.slot(name);
        counts.resize(regions.list.len(), 0);
        counts[k] += row.count;
        row_of.insert((row.rank, row.region, row.offset), k);
    }
    let mut regions = regions.list;
    let mut reservoirs: Vec<Reservoir> = caps(&counts)
        .into_iter()
        .zip(&regions)
        .map(|(cap, r)| Reservoir::new(cap, seed(&[&r.name, "reservoir"])))
        .collect();
    let mut hb = Heartbeat::new();
    p.for_each_duration(CHUNK, |row, durs| {
        hb.tick();
        let Some(&k) = row_of.get(&(row.rank, row.region, row.offset)) else {
            return Ok(());
        };
        let (r, res) = (&mut regions[k], &mut reservoirs[k]);
        for &d in durs {
            r.calls += 1;
            r.total_ns += d as f64;
            r.min_ns = r.min_ns.min(d);
            r.max_ns = r.max_ns.max(d);
            res.push(d as f64);
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    for (r, res) in regions.iter_mut().zip(reservoirs) {
        let mut v = res.values;
        v.sort_unstable_by(f64::total_cmp);
        r.sample = Some(v);
    }
    regions.retain(|r| r.calls > 0);
    Ok(regions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_share_the_file_budget() {
        assert_eq!(caps(&[5, 200_000]), vec![5, REGION_CAP]);
        let c = caps(&[
            10, 50_000_000, 50_000_000, 50_000_000, 50_000_000, 50_000_000,
        ]);
        assert!(c.iter().sum::<usize>() <= FILE_CAP, "{c:?}");
        assert_eq!(c[0], 10);
        assert!(c[1] > 100_000 / 2, "{c:?}");
        let many = vec![1_000_000u64; 100];
        let c = caps(&many);
        assert_eq!(c.iter().sum::<usize>(), FILE_CAP);
        assert!(c.iter().all(|&x| x == FILE_CAP / 100));
    }

    #[test]
    fn the_reservoir_is_uniform_and_bounded() {
        // 100 000 values 0..100 000 through a reservoir of 1 000: the sample's mean is near
        // the stream's (sd of the mean of 1 000 uniform values: 28 867 / sqrt(1000) = 913).
        let mut r = Reservoir::new(1000, 9);
        for i in 0..100_000 {
            r.push(f64::from(i));
        }
        assert_eq!(r.values.len(), 1000);
        let m = r.values.iter().sum::<f64>() / 1000.0;
        assert!((m - 49_999.5).abs() < 4.0 * 913.0, "{m}");
        // Late values get in as often as early ones.
        let late = r.values.iter().filter(|&&v| v >= 50_000.0).count();
        assert!((400..=600).contains(&late), "{late}");
    }
}
