//! How the processes of one distributed run talk: a single collective, [`Exchange::exchange`]
//! (every rank sends one letter to every other rank and receives one from each), which both
//! MPI splits of the engine use — the flit simulator's routers split over ranks
//! ([`crate::flitsim::partition`]) and the rank-placement tempering ladder split over
//! processes ([`crate::mapping::anneal::optimize`]).
//!
//! Three carriers: [`SoloExchange`] for a run in one process, [`LocalExchange`] for ranks as
//! threads of one process (tests, and a stand-in for MPI), and whatever a caller implements the
//! trait with — the Python bindings carry the letters with mpi4py's `comm.alltoall`. Letters are
//! bytes, so a carrier needs to know nothing about what the run sends.
//!
//! ```
//! use netweave_core::exchange::{local_group, Exchange};
//! let mut ranks = local_group(2);
//! let b = ranks.pop().unwrap();
//! let peer = std::thread::spawn(move || { let mut b = b; b.exchange(vec![b"to 0".to_vec(), vec![]]).unwrap() });
//! let got = ranks[0].exchange(vec![vec![], b"to 1".to_vec()]).unwrap();
//! assert_eq!(got[1], b"to 0");
//! assert_eq!(peer.join().unwrap()[0], b"to 1");
//! ```

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use crate::error::{NetweaveError, Result};

/// How ranks swap letters: a collective every rank calls the same number of times.
pub trait Exchange: Send {
    /// This process's rank, `0..ranks()`.
    fn rank(&self) -> usize;
    /// Number of ranks taking part.
    fn ranks(&self) -> usize;
    /// Send `out[k]` to rank `k` (`out[rank()]` is ignored) and return what each rank sent this
    /// one, `[k]` from rank `k`. A rank that has gone away is an error naming it.
    fn exchange(&mut self, out: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>>;

    /// Every rank's `mine`, `[k]` from rank `k` (this rank's own included): an all-gather.
    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let (me, ranks) = (self.rank(), self.ranks());
        if ranks == 1 {
            return Ok(vec![mine.to_vec()]);
        }
        let mut got = self.exchange(vec![mine.to_vec(); ranks])?;
        got[me] = mine.to_vec();
        Ok(got)
    }

    /// Rank `root`'s `mine` on every rank (what the others pass is ignored): a broadcast.
    fn broadcast(&mut self, root: usize, mine: &[u8]) -> Result<Vec<u8>> {
        let (me, ranks) = (self.rank(), self.ranks());
        if root >= ranks {
            return crate::invalid!("broadcast from rank {root} among {ranks} ranks");
        }
        if me == root {
            if ranks > 1 {
                self.exchange(vec![mine.to_vec(); ranks])?;
            }
            return Ok(mine.to_vec());
        }
        Ok(self.exchange(vec![Vec::new(); ranks])?.swap_remove(root))
    }
}

/// The one rank of a run in one process: nothing to send, nobody to hear from.
#[derive(Clone, Copy, Debug, Default)]
pub struct SoloExchange;

impl Exchange for SoloExchange {
    fn rank(&self) -> usize {
        0
    }
    fn ranks(&self) -> usize {
        1
    }
    fn exchange(&mut self, _out: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>> {
        Ok(vec![Vec::new()])
    }
}

/// Ranks as threads of one process (tests, and a stand-in for MPI): one channel per ordered
/// pair, so rounds never mix.
pub struct LocalExchange {
    rank: usize,
    to: Vec<Option<Sender<Vec<u8>>>>,
    from: Vec<Option<Receiver<Vec<u8>>>>,
}

/// `n` connected [`LocalExchange`]s, rank `k` at index `k`.
pub fn local_group(n: usize) -> Vec<LocalExchange> {
    let mut group: Vec<LocalExchange> = (0..n)
        .map(|rank| LocalExchange { rank, to: (0..n).map(|_| None).collect(), from: (0..n).map(|_| None).collect() })
        .collect();
    for a in 0..n {
        for b in 0..n {
            if a != b {
                let (tx, rx) = channel();
                group[a].to[b] = Some(tx);
                group[b].from[a] = Some(rx);
            }
        }
    }
    group
}

/// How long a thread-rank waits for a peer before calling it stuck: far longer than any
/// exchange takes, short enough that a test fails instead of hanging.
const LOCAL_PEER_TIMEOUT: Duration = Duration::from_secs(120);

impl Exchange for LocalExchange {
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.to.len()
    }
    fn exchange(&mut self, mut out: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>> {
        let gone = |k: usize| NetweaveError::InvalidParameter(format!("rank {k} left the run"));
        for (k, tx) in self.to.iter().enumerate() {
            if let Some(tx) = tx {
                tx.send(std::mem::take(&mut out[k])).map_err(|_| gone(k))?;
            }
        }
        let mut got = vec![Vec::new(); self.ranks()];
        for (k, rx) in self.from.iter().enumerate() {
            if let Some(rx) = rx {
                got[k] = rx.recv_timeout(LOCAL_PEER_TIMEOUT).map_err(|e| match e {
                    RecvTimeoutError::Timeout => {
                        NetweaveError::InvalidParameter(format!("rank {k} sent nothing for two minutes"))
                    }
                    RecvTimeoutError::Disconnected => gone(k),
                })?;
            }
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `body` on `n` thread-ranks and collect what each returns, rank order.
    fn on_ranks<T: Send + 'static>(n: usize, body: fn(LocalExchange) -> T) -> Vec<T> {
        let handles: Vec<_> = local_group(n).into_iter().map(|link| std::thread::spawn(move || body(link))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn all_gather_returns_every_ranks_letter_in_rank_order() {
        let got = on_ranks(3, |mut link| {
            let mine = vec![link.rank() as u8 * 10];
            link.all_gather(&mine).unwrap()
        });
        for per_rank in got {
            assert_eq!(per_rank, vec![vec![0], vec![10], vec![20]]);
        }
    }

    #[test]
    fn broadcast_carries_the_roots_letter_only() {
        let got = on_ranks(3, |mut link| {
            let mine = vec![link.rank() as u8 + 1];
            link.broadcast(1, &mine).unwrap()
        });
        assert_eq!(got, vec![vec![2], vec![2], vec![2]]);
        assert!(SoloExchange.broadcast(1, b"x").is_err());
        assert_eq!(SoloExchange.broadcast(0, b"x").unwrap(), b"x");
    }

    #[test]
    fn a_rank_that_left_is_named() {
        let mut group = local_group(2);
        drop(group.pop());
        let e = group[0].exchange(vec![vec![], vec![1]]).unwrap_err();
        assert!(e.to_string().contains("rank 1 left"), "{e}");
    }
}
