//! Multi-rank runs: every rank serves its own metrics, labelled `rank="<world rank>"`, on the
//! configured port plus its *node-local* rank, so the ranks of one node never collide and
//! each node uses the same ports.
//!
//! The rank is MPI's own with [`Builder::mpi`](crate::Builder::mpi); without it, the
//! launcher's variables that also give such a rank its own output file
//! (`crate::data::launcher`). The node-local rank comes from the launcher: OpenMPI's
//! `OMPI_COMM_WORLD_LOCAL_RANK`, MPICH/Hydra's `MPI_LOCALRANKID`, Slurm's `SLURM_LOCALID`,
//! PMIx's `PMIX_LOCAL_RANK`, PALS's `PALS_LOCAL_RANKID`, MVAPICH's
//! `MV2_COMM_WORLD_LOCAL_RANK`; when none is set, the world rank stands in (ports stay
//! distinct, only sparser).

use std::net::SocketAddr;

/// Variables naming the node-local rank, in the order they are tried.
const LOCAL_VARS: [&str; 6] = [
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "SLURM_LOCALID",
    "PMIX_LOCAL_RANK",
    "PALS_LOCAL_RANKID",
    "MV2_COMM_WORLD_LOCAL_RANK",
];

/// Where a rank of a multi-rank run serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The world rank (the `rank` label).
    pub rank: u32,
    /// The node-local rank (the port offset).
    pub local: u32,
}

/// This process's placement: `mpi_rank` with `Builder::mpi`, else a launcher's rank; `None`
/// outside a multi-rank run. `env` reads a variable.
pub(crate) fn placement(
    mpi_rank: Option<u32>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<Placement> {
    let rank = mpi_rank.or_else(|| crate::data::launcher::detect(&env).map(|d| d.rank))?;
    let local = LOCAL_VARS
        .iter()
        .find_map(|v| env(v).and_then(|s| s.trim().parse::<u32>().ok()))
        .unwrap_or(rank);
    Some(Placement { rank, local })
}

/// `addrs` with their ports moved up by `offset` (port 0, "any port", stays 0).
///
/// # Errors
/// The message when a port would pass 65535.
pub(crate) fn shift(addrs: &[SocketAddr], offset: u32) -> Result<Vec<SocketAddr>, String> {
    addrs
        .iter()
        .map(|a| {
            if a.port() == 0 {
                return Ok(*a);
            }
            let port = u32::from(a.port()) + offset;
            let port = u16::try_from(port).map_err(|_| {
                format!(
                    "port {} plus node-local rank {offset} is beyond 65535",
                    a.port()
                )
            })?;
            let mut a = *a;
            a.set_port(port);
            Ok(a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::env_of as env;

    #[test]
    fn rank_and_local_rank_come_from_mpi_or_the_launcher() {
        assert_eq!(placement(None, env(&[])), None);
        let ompi = [
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ];
        assert_eq!(
            placement(None, env(&ompi)),
            Some(Placement { rank: 5, local: 1 })
        );
        // MPI's own rank wins; the local rank still comes from the launcher.
        assert_eq!(
            placement(Some(9), env(&ompi)),
            Some(Placement { rank: 9, local: 1 })
        );
        for var in LOCAL_VARS {
            let vars = [("PMI_RANK", "6"), (var, "2")];
            assert_eq!(
                placement(None, env(&vars)),
                Some(Placement { rank: 6, local: 2 }),
                "{var}"
            );
        }
        // No local rank: the world rank stands in.
        assert_eq!(
            placement(Some(3), env(&[])),
            Some(Placement { rank: 3, local: 3 })
        );
    }

    #[test]
    fn ports_shift_by_the_local_rank() {
        let a: Vec<SocketAddr> = vec![
            "127.0.0.1:9464".parse().unwrap(),
            "[::1]:0".parse().unwrap(),
        ];
        let s = shift(&a, 3).unwrap();
        assert_eq!(s[0].port(), 9467);
        assert_eq!(s[1].port(), 0);
        let e = shift(&["0.0.0.0:65535".parse().unwrap()], 1).unwrap_err();
        assert!(e.contains("65535"), "{e}");
    }
}
