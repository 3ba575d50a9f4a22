//! Typed access to the datasets and attributes of a file being read, with every failure turned
//! into a [`ReadError`] that names the object and what is wrong with it.
//!
//! The reader is strict about types (a numeric column must be an integer dataset of one
//! dimension, a text column a string dataset) and lenient about widths and string flavours, as
//! the Python reader is: any integer width converts, and fixed-length or ASCII strings are read
//! as well as variable-length UTF-8.

use std::ops::Range;

use ::hdf5::types::{FixedAscii, FixedUnicode, TypeDescriptor, VarLenAscii, VarLenUnicode};
use ::hdf5::{Dataset, File, H5Type};

use super::{EventColumns, ReadError};

/// Longest fixed-length string read in full; longer ones are cut (region names are short).
const FIXED_STR: usize = 1024;

/// One open file and its path, for error messages.
pub(super) struct H5<'a> {
    pub(super) file: &'a File,
    pub(super) err: &'a dyn Fn(String) -> ReadError,
}

impl H5<'_> {
    /// Whether `path` (a dataset or group path under the root) exists.
    pub(super) fn exists(&self, path: &str) -> bool {
        // `link_exists` on an intermediate group that is missing fails; walk the components.
        let mut at = String::new();
        for part in path.split('/') {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(part);
            if !self.file.link_exists(&at) {
                return false;
            }
        }
        true
    }

    /// The one-dimensional dataset `path` and its length.
    pub(super) fn dataset(&self, path: &str) -> Result<(Dataset, u64), ReadError> {
        if !self.exists(path) {
            return Err((self.err)(format!("dataset `{path}` is missing")));
        }
        let ds = self
            .file
            .dataset(path)
            .map_err(|e| (self.err)(format!("cannot open dataset `{path}`: {}", short(&e))))?;
        let shape = ds.shape();
        if shape.len() != 1 {
            return Err((self.err)(format!(
                "dataset `{path}` has {} dimensions, expected 1",
                shape.len()
            )));
        }
        let n = shape[0] as u64;
        check_declared(&ds, path, n, self.err)?;
        Ok((ds, n))
    }

    /// The integer dataset `path`: checks that its element type is an integer.
    pub(super) fn int_dataset(&self, path: &str) -> Result<(Dataset, u64), ReadError> {
        let (ds, n) = self.dataset(path)?;
        match descriptor(&ds, path, self.err)? {
            TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => Ok((ds, n)),
            other => Err((self.err)(format!(
                "dataset `{path}` holds {}, expected integers",
                describe(&other)
            ))),
        }
    }

    /// The event columns (schema 3's `start_deltas` and `durations`, or schema 2's
    /// `start_times` and `end_times`, and the optional per-call columns) and their length,
    /// checked to agree.
    pub(super) fn event_columns(&self) -> Result<(EventColumns, u64), ReadError> {
        let err = self.err;
        let (deltas, starts_name, ends_name) = if self.exists("events/start_deltas") {
            (true, "events/start_deltas", "events/durations")
        } else if self.exists("events/start_times") {
            (false, "events/start_times", "events/end_times")
        } else {
            return Err(err("dataset `events/start_deltas` is missing".into()));
        };
        let (starts, n) = self.int_dataset(starts_name)?;
        let (ends, n_ends) = self.int_dataset(ends_name)?;
        if n_ends != n {
            return Err(err(format!(
                "`{ends_name}` has {n_ends} elements but `{starts_name}` has {n}"
            )));
        }
        let optional = |path: &str| -> Result<Option<Dataset>, ReadError> {
            if !self.exists(path) {
                return Ok(None);
            }
            let (ds, len) = self.int_dataset(path)?;
            if len != n {
                return Err(err(format!(
                    "`{path}` has {len} elements, expected {n} (one per call)"
                )));
            }
            Ok(Some(ds))
        };
        let columns = EventColumns {
            starts,
            deltas,
            ends,
            thread_ids: optional("events/thread_ids")?,
            task_ids: optional("events/task_ids")?,
            gpu: optional("events/gpu_durations")?,
            scheduled: optional("scope_profiler_rs/call_scheduled_ns")?,
            awaits: optional("events/await_ns")?,
        };
        Ok((columns, n))
    }

    /// Reads the whole integer dataset `path` as `T` (it must have `expect` elements when set).
    pub(super) fn ints<T: H5Type>(
        &self,
        path: &str,
        expect: Option<u64>,
    ) -> Result<Vec<T>, ReadError> {
        let (ds, n) = self.int_dataset(path)?;
        if let Some(expect) = expect {
            if n != expect {
                return Err((self.err)(format!(
                    "dataset `{path}` has {n} elements, expected {expect}"
                )));
            }
        }
        read_range(&ds, path, 0..n as usize, self.err)
    }

    /// Reads the whole string dataset `path` (it must have `expect` elements when set).
    pub(super) fn strings(
        &self,
        path: &str,
        expect: Option<u64>,
    ) -> Result<Vec<String>, ReadError> {
        let (ds, n) = self.dataset(path)?;
        if let Some(expect) = expect {
            if n != expect {
                return Err((self.err)(format!(
                    "dataset `{path}` has {n} elements, expected {expect}"
                )));
            }
        }
        let fail = |e: ::hdf5::Error| (self.err)(format!("cannot read `{path}`: {}", short(&e)));
        let strings = match descriptor(&ds, path, self.err)? {
            TypeDescriptor::VarLenUnicode => ds
                .read_raw::<VarLenUnicode>()
                .map_err(fail)?
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
            TypeDescriptor::VarLenAscii => ds
                .read_raw::<VarLenAscii>()
                .map_err(fail)?
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
            TypeDescriptor::FixedAscii(_) => ds
                .read_raw::<FixedAscii<FIXED_STR>>()
                .map_err(fail)?
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
            TypeDescriptor::FixedUnicode(_) => ds
                .read_raw::<FixedUnicode<FIXED_STR>>()
                .map_err(fail)?
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect(),
            other => {
                return Err((self.err)(format!(
                    "dataset `{path}` holds {}, expected strings",
                    describe(&other)
                )))
            }
        };
        Ok(strings)
    }

    /// Reads an optional integer attribute of `loc`; `None` when absent or not an integer.
    pub(super) fn int_attr(&self, loc: &str, name: &str) -> Option<i64> {
        let attr = if loc.is_empty() {
            self.file.attr(name).ok()?
        } else {
            self.file.group(loc).ok()?.attr(name).ok()?
        };
        match attr.dtype().ok()?.to_descriptor().ok()? {
            TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) if attr.ndim() == 0 => {
                attr.read_scalar::<i64>().ok()
            }
            _ => None,
        }
    }

    /// Reads an optional string attribute of `loc`; `None` when absent or not a string.
    pub(super) fn str_attr(&self, loc: &str, name: &str) -> Option<String> {
        let attr = if loc.is_empty() {
            self.file.attr(name).ok()?
        } else {
            self.file.group(loc).ok()?.attr(name).ok()?
        };
        if attr.ndim() != 0 {
            return None;
        }
        match attr.dtype().ok()?.to_descriptor().ok()? {
            TypeDescriptor::VarLenUnicode => attr
                .read_scalar::<VarLenUnicode>()
                .ok()
                .map(|s| s.to_string()),
            TypeDescriptor::VarLenAscii => attr
                .read_scalar::<VarLenAscii>()
                .ok()
                .map(|s| s.to_string()),
            TypeDescriptor::FixedAscii(_) => attr
                .read_scalar::<FixedAscii<FIXED_STR>>()
                .ok()
                .map(|s| s.to_string()),
            TypeDescriptor::FixedUnicode(_) => attr
                .read_scalar::<FixedUnicode<FIXED_STR>>()
                .ok()
                .map(|s| s.to_string()),
            _ => None,
        }
    }
}

/// The element type of `ds`.
fn descriptor(
    ds: &Dataset,
    path: &str,
    err: &dyn Fn(String) -> ReadError,
) -> Result<TypeDescriptor, ReadError> {
    ds.dtype().and_then(|t| t.to_descriptor()).map_err(|e| {
        err(format!(
            "dataset `{path}` has an unreadable type: {}",
            short(&e)
        ))
    })
}

/// How many times its stored bytes a dataset may declare. Deflate compresses at most ~1 032
/// to 1; other filters a file may use (zstd, blosc) go further on constant data, so the
/// bound is wide: it is there for the few-KB file that declares 2^40 elements, and the
/// reading child's data limit (`scopeprof --data-limit-mib`) covers what lies between.
const MAX_EXPANSION: u64 = 100_000;
/// Declared bytes accepted whatever is stored (small tables, empty chunked datasets).
const FREE_BYTES: u64 = 1 << 20;

/// A dataset's declared size must be one its stored bytes can hold: a few-KB file that
/// declares 2^40 elements would otherwise size the reader's allocation (whole tables are
/// read at once; the event columns in chunks). Errors name the dataset and both sizes.
fn check_declared(
    ds: &Dataset,
    path: &str,
    n: u64,
    err: &dyn Fn(String) -> ReadError,
) -> Result<(), ReadError> {
    let elem = ds.dtype().map_or(1, |t| t.size() as u64).max(1);
    let declared = n.saturating_mul(elem);
    let stored = ds.storage_size();
    if declared > FREE_BYTES && declared / MAX_EXPANSION > stored {
        return Err(err(format!(
            "dataset `{path}` declares {n} elements ({declared} bytes) but stores {stored} \
             bytes: the file is damaged or not a profile"
        )));
    }
    Ok(())
}

/// Reads elements `range` of the one-dimensional dataset `ds` (named `path` in errors).
pub(super) fn read_range<T: H5Type>(
    ds: &Dataset,
    path: &str,
    range: Range<usize>,
    err: &dyn Fn(String) -> ReadError,
) -> Result<Vec<T>, ReadError> {
    if range.is_empty() {
        return Ok(Vec::new());
    }
    let (a, b) = (range.start, range.end);
    let array = ds
        .read_slice_1d::<T, _>(range)
        .map_err(|e| err(format!("cannot read `{path}`[{a}..{b}]: {}", short(&e))))?;
    Ok(array.into_raw_vec_and_offset().0)
}

/// A type in words, for "expected integers" messages.
fn describe(t: &TypeDescriptor) -> &'static str {
    match t {
        TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => "integers",
        TypeDescriptor::Float(_) => "floating-point numbers",
        TypeDescriptor::Boolean => "booleans",
        TypeDescriptor::Enum(_) => "enumeration values",
        TypeDescriptor::Compound(_) => "compound records",
        TypeDescriptor::FixedArray(..) | TypeDescriptor::VarLenArray(_) => "arrays",
        TypeDescriptor::FixedAscii(_)
        | TypeDescriptor::FixedUnicode(_)
        | TypeDescriptor::VarLenAscii
        | TypeDescriptor::VarLenUnicode => "strings",
        _ => "values of another type",
    }
}

/// An HDF5 error's message on one line.
pub(super) fn short(e: &::hdf5::Error) -> String {
    let s = e.to_string();
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
