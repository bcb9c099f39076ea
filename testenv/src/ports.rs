use std::future::Future;
use std::net::TcpListener;

use crate::{Error, Result};

/// Starts made again after a component found its port taken.
const PORT_RETRIES: u32 = 2;

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

/// Runs `start` again (up to [`PORT_RETRIES`] times) while it fails because a component found a
/// port taken: ports from [`free_ports`] are free when chosen but not held until the components
/// bind them, so a sibling plane or peer can take one in between, and a new start chooses others.
pub(crate) async fn retry_if_port_taken<T, Fut>(what: &str, mut start: impl FnMut() -> Fut) -> Result<T>
where
    Fut: Future<Output = Result<T>>,
{
    let mut retries = PORT_RETRIES;
    loop {
        match start().await {
            Err(e) if retries > 0 && e.is_port_taken() => {
                tracing::warn!(error = %e, what, "a port was taken; starting again");
                retries -= 1;
            }
            started => return started,
        }
    }
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
