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

    /// Writes a 1-D variable-length UTF-8 string dataset.
    pub(crate) fn strings<'s>(
        &self,
        group: &Group,
        name: &str,
        values: impl IntoIterator<Item = &'s str>,
    ) -> Result<(), Error> {
        let values: Vec<VarLenUnicode> = values.into_iter().map(vlen).collect();
        self.dataset(group, name, &values, None)
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
