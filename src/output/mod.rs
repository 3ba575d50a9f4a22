//! Output formats: the schema-3 HDF5 file and the text summary, both built from one
//! [`model::PhaseData`] per finalize.

pub(crate) mod events;
pub(crate) mod hdf5;
pub(crate) mod hdf5_aux;
pub(crate) mod hdf5_ctx;
pub(crate) mod hdf5_lanes;
pub(crate) mod hdf5_lines;
pub(crate) mod model;
pub(crate) mod source;
pub(crate) mod summary;
