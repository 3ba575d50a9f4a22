//! The collectives of a multi-rank finalize besides the relay's own messages: element-wise
//! reductions and the exclusive scan of small `u64` arrays (the parallel file's layout, see
//! [`super::layout`]), broadcasts of bytes and integers from rank 0, and a scatter of one
//! `i64` per rank (each rank's clock offset).

use ::mpi::collective::SystemOperation;
use ::mpi::topology::SimpleCommunicator;
use ::mpi::traits::*;

use super::relay::Mpi;

// All but `all_min` serve only the parallel write (feature `mpio`).
#[cfg_attr(not(feature = "mpio"), allow(dead_code))]
impl Mpi {
    /// Element-wise maximum of `v` over all ranks.
    pub(crate) fn all_max(&self, v: &[u64]) -> Vec<u64> {
        let mut out = vec![0u64; v.len()];
        SimpleCommunicator::world().all_reduce_into(v, &mut out[..], SystemOperation::max());
        out
    }

    /// Minimum of `v` over all ranks (1 only when every rank says 1).
    pub(crate) fn all_min(&self, v: u64) -> u64 {
        let mut out = 0u64;
        SimpleCommunicator::world().all_reduce_into(&v, &mut out, SystemOperation::min());
        out
    }

    /// The exclusive prefix sum of `v` over the ranks before this one (zeros on rank 0) and
    /// the sum over all ranks, element-wise.
    pub(crate) fn exscan(&self, v: &[u64]) -> (Vec<u64>, Vec<u64>) {
        let world = SimpleCommunicator::world();
        let mut before = vec![0u64; v.len()];
        world.exclusive_scan_into(v, &mut before[..], SystemOperation::sum());
        if self.rank == 0 {
            // MPI leaves rank 0's result undefined.
            before.iter_mut().for_each(|x| *x = 0);
        }
        let mut total = vec![0u64; v.len()];
        world.all_reduce_into(v, &mut total[..], SystemOperation::sum());
        (before, total)
    }

    /// Rank 0's `bytes` on every rank (other ranks' argument is ignored).
    pub(crate) fn bcast_bytes(&self, bytes: Vec<u8>) -> Vec<u8> {
        let world = SimpleCommunicator::world();
        let root = world.process_at_rank(0);
        let mut len = bytes.len() as u64;
        root.broadcast_into(&mut len);
        let mut buf = if self.rank == 0 {
            bytes
        } else {
            vec![0u8; len as usize]
        };
        // In bounded pieces: MPI counts are `int`.
        for piece in buf.chunks_mut(super::relay::MSG_BYTES) {
            root.broadcast_into(piece);
        }
        buf
    }

    /// Rank 0's `v` on every rank.
    pub(crate) fn bcast_i64(&self, v: i64) -> i64 {
        let mut v = v;
        SimpleCommunicator::world()
            .process_at_rank(0)
            .broadcast_into(&mut v);
        v
    }

    /// Rank k gets `all[k]` of rank 0's `all` (one per rank; ignored elsewhere).
    pub(crate) fn scatter_i64(&self, all: &[i64]) -> i64 {
        let world = SimpleCommunicator::world();
        let root = world.process_at_rank(0);
        let mut mine = 0i64;
        if self.rank == 0 {
            let mut full = all.to_vec();
            full.resize(self.size as usize, 0);
            root.scatter_into_root(&full[..], &mut mine);
        } else {
            root.scatter_into(&mut mine);
        }
        mine
    }
}
