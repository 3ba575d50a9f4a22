//! Writing HDF5 objects with errors that name the file and the object: [`Ctx`], shared by
//! every writer of the schema (the core groups, the lanes, line profiles, the `rank0`
//! auxiliary groups). String attributes are cleaned of NULs and truncated like the Python
//! package truncates them.

use std::path::Path;

use ::hdf5::types::VarLenUnicode;
use ::hdf5::{File, Group, H5Type, Location};

use crate::error::Error;

/// Longest string attribute, in characters, before it is truncated (as the Python package does).
pub(crate) const MAX_ATTR_CHARS: usize = 60_000;
/// Suffix of a truncated string attribute.
pub(crate) const TRUNCATION_MARKER: &str = "...[truncated]";
/// Largest chunk, in elements, of a compressed dataset.
const MAX_CHUNK: usize = 65_536;
/// Shortest string column written as a fill value when all its values are equal
/// ([`Ctx::constant_strings`]); shorter ones are written element by element, as h5py would.
const CONSTANT_MIN_ROWS: usize = 1024;

/// Maps HDF5 errors to [`Error::Hdf5`] for one target file.
pub(crate) struct Ctx<'a> {
    /// The published path (what the user asked for), named in every error.
    pub(crate) path: &'a Path,
}

impl Ctx<'_> {
    /// Converts an HDF5 result, naming `context` (the object being written) on failure.
    pub(crate) fn h5<T>(&self, context: &str, result: ::hdf5::Result<T>) -> Result<T, Error> {
        result.map_err(|e| Error::Hdf5 {
            path: self.path.to_path_buf(),
            context: context.to_string(),
            message: e.to_string(),
        })
    }

    /// Creates the group `name` under the root.
    pub(crate) fn group(&self, file: &File, name: &str) -> Result<Group, Error> {
        self.h5(name, file.create_group(name))
    }

    /// Writes a 1-D dataset `group/name` holding `values`; compressed (shuffle + deflate) when
    /// `gzip` is set and there is at least one element.
    pub(crate) fn dataset<T: H5Type>(
        &self,
        group: &Group,
        name: &str,
        values: &[T],
        gzip: Option<u8>,
    ) -> Result<(), Error> {
        let context = format!("{}/{name}", group.name().trim_start_matches('/'));
        let created = if values.is_empty() {
            group.new_dataset::<T>().shape(0).create(name)
        } else {
            let mut builder = group.new_dataset_builder();
            if let Some(level) = gzip {
                builder = builder
                    .chunk(values.len().min(MAX_CHUNK))
                    .shuffle()
                    .deflate(level.min(9));
            }
            builder.with_data(values).create(name)
        };
        self.h5(&context, created).map(drop)
    }

    /// Writes a 1-D dataset `group/name` of `f(row)` for every row, uncompressed, through one
    /// small reused buffer: a lane table or the polls can have millions of rows, and a fresh
    /// full-length vector per column costs more in page faults than the write itself.
    pub(crate) fn column<R, T: H5Type + Copy>(
        &self,
        group: &Group,
        name: &str,
        rows: &[R],
        f: impl Fn(&R) -> T,
    ) -> Result<(), Error> {
        /// Rows per write: a 128 KiB buffer of i64, below glibc's mmap threshold.
        const BLOCK: usize = 16_384;
        let context = format!("{}/{name}", group.name().trim_start_matches('/'));
        let ds = self.h5(
            &context,
            group.new_dataset::<T>().shape(rows.len()).create(name),
        )?;
        let mut buf: Vec<T> = Vec::with_capacity(BLOCK.min(rows.len()));
        for (k, block) in rows.chunks(BLOCK).enumerate() {
            buf.clear();
            buf.extend(block.iter().map(&f));
            let at = k * BLOCK;
            self.h5(&context, ds.write_slice(&buf[..], at..at + block.len()))?;
        }
        Ok(())
    }

    /// Writes a 1-D variable-length UTF-8 string dataset.
    ///
    /// Fast for long columns (a task table has a row per task): the strings are copied once
    /// into one NUL-separated arena, a value equal to the previous one is not copied again, and
    /// HDF5 reads them through pointers into it ([`StrPtr`]); no allocation per string. What
    /// remains per string is HDF5's own global-heap insert.
    pub(crate) fn strings<'s>(
        &self,
        group: &Group,
        name: &str,
        values: impl IntoIterator<Item = &'s str>,
    ) -> Result<(), Error> {
        let mut arena: Vec<u8> = Vec::new();
        let mut offsets: Vec<usize> = Vec::new();
        let mut previous: Option<&str> = None;
        for v in values {
            if previous == Some(v) {
                offsets.push(*offsets.last().unwrap_or(&0));
                continue;
            }
            previous = Some(v);
            offsets.push(arena.len());
            if v.contains('\0') {
                arena.extend_from_slice(v.replace('\0', "\u{FFFD}").as_bytes());
            } else {
                arena.extend_from_slice(v.as_bytes());
            }
            arena.push(0);
        }
        if offsets.len() >= CONSTANT_MIN_ROWS && offsets.iter().all(|&o| o == 0) {
            return self.constant_strings(group, name, &arena[..arena.len() - 1], offsets.len());
        }
        // The arena is complete: pointers into it stay valid until it is dropped below.
        let base = arena.as_ptr();
        // SAFETY: every offset is the start of a string inside `arena` (pushed above), so the
        // pointer stays within the allocation.
        let ptrs: Vec<StrPtr> = offsets
            .iter()
            .map(|&o| StrPtr(unsafe { base.add(o) }))
            .collect();
        let written = self.dataset(group, name, &ptrs, None);
        drop(arena);
        written
    }

    /// A string column of `n` copies of `value`: chunked, with `value` as its fill value and no
    /// chunk ever written, so a reader gets `value` for every element (HDF5 returns the fill
    /// value for unallocated chunks) and HDF5 stores no string per element. A column whose
    /// values are all equal (`task_table/kind` always is) then costs nothing per row.
    ///
    /// Only ever whole columns: HDF5 1.10 cannot read a variable-length column with a fill
    /// value that has some chunks written and others not from a read-only file.
    fn constant_strings(
        &self,
        group: &Group,
        name: &str,
        value: &[u8],
        n: usize,
    ) -> Result<(), Error> {
        let context = format!("{}/{name}", group.name().trim_start_matches('/'));
        let value = vlen(std::str::from_utf8(value).unwrap_or_default());
        let created = group
            .new_dataset::<VarLenUnicode>()
            .shape(n)
            .chunk(n.min(MAX_CHUNK))
            .fill_value(value)
            .create(name);
        self.h5(&context, created).map(drop)
    }

    /// Writes a scalar attribute of any fixed type.
    pub(crate) fn attr<T: H5Type>(
        &self,
        loc: &Location,
        name: &str,
        value: &T,
    ) -> Result<(), Error> {
        let context = format!("{}@{name}", loc.name().trim_start_matches('/'));
        let written = loc
            .new_attr::<T>()
            .shape(())
            .create(name)
            .and_then(|attr| attr.write_scalar(value));
        self.h5(&context, written)
    }

    /// Writes a scalar variable-length UTF-8 string attribute, truncated to 60,000 characters.
    pub(crate) fn attr_str(&self, loc: &Location, name: &str, value: &str) -> Result<(), Error> {
        self.attr(loc, name, &vlen(&truncate(value)))
    }

    /// Writes a scalar variable-length UTF-8 string attribute whole (a JSON list that must
    /// stay parseable, however long), replacing one of that name.
    #[cfg_attr(not(feature = "mpio"), allow(dead_code))]
    pub(crate) fn attr_text(&self, loc: &Location, name: &str, value: &str) -> Result<(), Error> {
        if loc.attr(name).is_ok() {
            let context = format!("{}@{name}", loc.name().trim_start_matches('/'));
            self.h5(&context, loc.delete_attr(name))?;
        }
        self.attr(loc, name, &vlen(value))
    }

    /// A 1-D vlen UTF-8 string array attribute (shape `(0,)` when empty, like h5py).
    pub(crate) fn attr_strs(
        &self,
        loc: &Location,
        name: &str,
        values: &[String],
    ) -> Result<(), Error> {
        let values: Vec<VarLenUnicode> = values.iter().map(|s| vlen(s)).collect();
        let written = loc
            .new_attr::<VarLenUnicode>()
            .shape(values.len())
            .create(name)
            .and_then(|a| {
                if values.is_empty() {
                    Ok(())
                } else {
                    a.write_raw(&values)
                }
            });
        self.h5(
            &format!("{}@{name}", loc.name().trim_start_matches('/')),
            written,
        )
    }

    /// A 2-D f64 dataset of shape `(rows.len(), cols)`; short rows are padded with 0.
    pub(crate) fn matrix(
        &self,
        g: &Group,
        name: &str,
        rows: &[Vec<f64>],
        cols: usize,
    ) -> Result<(), Error> {
        let context = format!("{}/{name}", g.name().trim_start_matches('/'));
        let mut flat = Vec::with_capacity(rows.len() * cols);
        for row in rows {
            flat.extend((0..cols).map(|t| row.get(t).copied().unwrap_or(0.0)));
        }
        let written = g
            .new_dataset::<f64>()
            .shape((rows.len(), cols))
            .create(name)
            .and_then(|ds| {
                if flat.is_empty() {
                    Ok(())
                } else {
                    ds.write_raw(&flat)
                }
            });
        self.h5(&context, written)
    }
}

/// A borrowed NUL-terminated UTF-8 string: what HDF5 reads for a variable-length string
/// element in memory, without the ownership (and the allocation per string) of
/// [`VarLenUnicode`]. Only [`Ctx::strings`] makes them, pointing into an arena that outlives
/// the write.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct StrPtr(*const u8);

// SAFETY: `StrPtr` has the memory layout HDF5 expects of a variable-length UTF-8 string
// element (one `char*` to a NUL-terminated string, exactly `VarLenUnicode`'s layout), which is
// what the descriptor declares. HDF5 only reads through the pointers while writing; it never
// frees or keeps them. Reading into a `StrPtr` is never done.
unsafe impl H5Type for StrPtr {
    fn type_descriptor() -> ::hdf5::types::TypeDescriptor {
        ::hdf5::types::TypeDescriptor::VarLenUnicode
    }
}

/// Converts to `VarLenUnicode`, which cannot hold NUL: those become U+FFFD.
fn vlen(s: &str) -> VarLenUnicode {
    let cleaned;
    let s = if s.contains('\0') {
        cleaned = s.replace('\0', "\u{FFFD}");
        &cleaned
    } else {
        s
    };
    // Cannot fail: NULs were replaced above. Fall back to an empty string rather than panic.
    s.parse().unwrap_or_default()
}

/// Clips a string longer than [`MAX_ATTR_CHARS`] characters, ending it with the marker.
pub(crate) fn truncate(s: &str) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(MAX_ATTR_CHARS) {
        None => s.into(),
        Some(_) => {
            let keep = MAX_ATTR_CHARS - TRUNCATION_MARKER.chars().count();
            let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
            format!("{}{TRUNCATION_MARKER}", &s[..end]).into()
        }
    }
}
