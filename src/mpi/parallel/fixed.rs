//! Fixed-length UTF-8 string columns: the string columns of a file written in parallel.
//!
//! HDF5 1.10 cannot write variable-length data through MPI-IO ("Parallel IO does not support
//! writing VL datatypes yet"), so every string column whose rows the ranks write themselves
//! (`rank_region_index/source_files|source_texts|tags`, `thread_table/name`,
//! `task_table/kind|name|coro_name`) is a fixed-length string column instead: UTF-8,
//! NUL-padded, as wide as its longest value over all ranks (at least 1 byte). h5py returns
//! such a column as bytes, which the Python reference reader decodes like the variable-length
//! strings (checked by the MPI tests); this crate's reader reads both. A NUL inside a value
//! becomes U+FFFD, as in the variable-length columns.
//!
//! The width is only known at run time, and hdf5-metno's typed writes need it at compile
//! time: the rows are written with `H5Dwrite`, the file's own type as the memory type.

use std::borrow::Cow;

use ::hdf5::dataset::{AllocTime, FillTime};
use ::hdf5::types::TypeDescriptor;
use ::hdf5::{Dataset, Group, Hyperslab, Selection, SliceOrIndex};

/// Rows per `H5Dwrite`.
const BLOCK: usize = 16_384;

/// `s` as stored: NULs replaced (they would end the value early).
pub(super) fn clean(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        s.replace('\0', "\u{FFFD}").into()
    } else {
        s.into()
    }
}

/// Bytes `s` takes in a fixed-length column (after [`clean`]).
pub(super) fn width_of(s: &str) -> u64 {
    // U+FFFD is 3 bytes where the NUL was 1.
    (s.len() + 2 * s.bytes().filter(|&b| b == 0).count()) as u64
}

/// Creates the column `name` of `n` rows, `width` bytes each, allocated at creation and never
/// filled (each rank writes its own rows, through MPI-IO, without changing the file's
/// metadata).
pub(super) fn create(group: &Group, name: &str, n: usize, width: u64) -> ::hdf5::Result<Dataset> {
    group
        .new_dataset_builder()
        .empty_as(TypeDescriptor::FixedUnicode(width.max(1) as usize))
        .alloc_time(Some(AllocTime::Early))
        .fill_time(FillTime::Never)
        .shape(n)
        .create(name)
}

/// Writes `values` as rows `at..` of the fixed-length column `ds`.
pub(super) fn write<'s>(
    ds: &Dataset,
    at: usize,
    values: impl IntoIterator<Item = &'s str>,
) -> ::hdf5::Result<()> {
    let dtype = ds.dtype()?;
    let width = dtype.size();
    let mut buf: Vec<u8> = Vec::with_capacity(width * BLOCK);
    let mut first = at;
    let mut rows = 0;
    for v in values {
        let v = clean(v);
        let bytes = v.as_bytes();
        if bytes.len() > width {
            return Err(format!(
                "a value of {} bytes does not fit the column's {width}",
                bytes.len()
            )
            .into());
        }
        buf.extend_from_slice(bytes);
        buf.resize(buf.len() + width - bytes.len(), 0);
        rows += 1;
        if rows == BLOCK {
            write_rows(ds, &dtype, first, rows, &buf)?;
            first += rows;
            rows = 0;
            buf.clear();
        }
    }
    if rows > 0 {
        write_rows(ds, &dtype, first, rows, &buf)?;
    }
    Ok(())
}

/// One `H5Dwrite` of `rows` rows of `buf` at `first`.
fn write_rows(
    ds: &Dataset,
    dtype: &::hdf5::Datatype,
    first: usize,
    rows: usize,
    buf: &[u8],
) -> ::hdf5::Result<()> {
    debug_assert_eq!(buf.len(), rows * dtype.size());
    let slab = Hyperslab::from(vec![SliceOrIndex::from(first..first + rows)]);
    let fspace = ds.space()?.select(Selection::Hyperslab(slab))?;
    let mspace = ::hdf5::Dataspace::try_new(rows)?;
    ::hdf5::sync::sync(|| {
        // SAFETY: every id is a live HDF5 object held above for the whole call; `buf` holds
        // exactly `rows` elements of `dtype` (checked above), the size the memory space
        // selects; HDF5 only reads it. The call holds hdf5-metno's library lock (`sync`).
        let status = unsafe {
            hdf5_sys::h5d::H5Dwrite(
                ds.id(),
                dtype.id(),
                mspace.id(),
                fspace.id(),
                hdf5_sys::h5p::H5P_DEFAULT,
                buf.as_ptr().cast(),
            )
        };
        // HDF5's error stack, as hdf5-metno's own calls report it.
        ::hdf5::h5check(status).map(drop)
    })
}
