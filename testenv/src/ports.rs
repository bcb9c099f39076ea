use std::net::TcpListener;

use crate::{Error, Result};

/// `n` distinct free loopback ports. All listeners are held until every port is chosen, so the
/// ports differ from each other; another process could still take one before we bind it.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").map_err(Error::io("127.0.0.1:0")))
        .collect::<Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()).map_err(Error::io("127.0.0.1:0")))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ports_are_distinct_and_nonzero() {
        let mut ports = super::free_ports(6).unwrap();
        assert!(ports.iter().all(|p| *p != 0));
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 6);
    }
}
