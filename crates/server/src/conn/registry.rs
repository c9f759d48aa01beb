//! The open connections, by client: each client's share, and which idle
//! connection is closed to make room for a new one.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::activity::Activity;

/// Whose share a connection counts in: an IPv4 address, or the /64 of an
/// IPv6 address (one host usually holds a whole /64, so counting single
/// IPv6 addresses would give it billions of shares).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    /// The key of a peer address (an IPv4-mapped IPv6 address is its IPv4).
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & (u128::MAX << 64);
                    Self(IpAddr::V6(Ipv6Addr::from(prefix)))
                }
            },
        }
    }
}

/// One open connection.
struct Open {
    client: ClientKey,
    activity: Arc<Activity>,
    close: Arc<Notify>,
    /// Told to close: no longer counted in its client's share, and not
    /// chosen again.
    closing: bool,
}

#[derive(Default)]
struct Inner {
    next: u64,
    open: HashMap<u64, Open>,
    /// Open connections per client, not counting those told to close.
    shares: HashMap<ClientKey, usize>,
}

/// Every open connection of one listener.
#[derive(Default)]
pub(crate) struct Registry {
    inner: Mutex<Inner>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many connections `client` holds (not counting those closing).
    pub(crate) fn share(&self, client: ClientKey) -> usize {
        self.lock().shares.get(&client).copied().unwrap_or(0)
    }

    /// Notes a new connection; it stays noted until the returned guard is
    /// dropped. `close` is notified when it is chosen to make room.
    pub(crate) fn register(
        self: &Arc<Self>,
        client: ClientKey,
        activity: Arc<Activity>,
        close: Arc<Notify>,
    ) -> Registration {
        let mut inner = self.lock();
        let id = inner.next;
        inner.next += 1;
        inner.open.insert(
            id,
            Open {
                client,
                activity,
                close,
                closing: false,
            },
        );
        *inner.shares.entry(client).or_insert(0) += 1;
        Registration {
            registry: self.clone(),
            id,
        }
    }

    /// Closes the least recently active connection that serves no request
    /// (of `client` only, when given); `false` when there is none.
    pub(crate) fn make_room(&self, client: Option<ClientKey>) -> bool {
        let mut inner = self.lock();
        let chosen = inner
            .open
            .iter()
            .filter(|(_, open)| !open.closing && client.is_none_or(|c| c == open.client))
            .filter_map(|(id, open)| open.activity.idle_since().map(|since| (since, *id)))
            .min();
        let Some((_, id)) = chosen else {
            return false;
        };
        let Some(open) = inner.open.get_mut(&id) else {
            return false;
        };
        open.closing = true;
        open.close.notify_one();
        let client = open.client;
        release_share(&mut inner.shares, client);
        true
    }
}

fn release_share(shares: &mut HashMap<ClientKey, usize>, client: ClientKey) {
    if let Some(count) = shares.get_mut(&client) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            shares.remove(&client);
        }
    }
}

/// A noted connection; dropping it (the connection closed) forgets it.
pub(crate) struct Registration {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        if let Some(open) = inner.open.remove(&self.id)
            && !open.closing
        {
            release_share(&mut inner.shares, open.client);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn ipv6_hosts_share_by_64_and_mapped_addresses_are_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(ClientKey::of(a), ClientKey::of(b));
        assert_ne!(ClientKey::of(a), ClientKey::of(c));
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(
            ClientKey::of(mapped),
            ClientKey::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_least_recently_active_idle_connection_makes_room() {
        let registry = Arc::new(Registry::default());
        let one = ClientKey::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        let two = ClientKey::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        let open = |client| {
            let activity = Arc::new(Activity::new());
            let close = Arc::new(Notify::new());
            let guard = registry.register(client, activity.clone(), close.clone());
            (activity, close, guard)
        };
        let (_, old_close, _old) = open(one);
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let (busy, busy_close, _busy) = open(one);
        let _serving = super::super::activity::RequestGuard::begin(busy);
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let (_, other_close, _other) = open(two);
        assert_eq!(registry.share(one), 2);

        // The oldest idle one goes; a connection serving a request never does.
        assert!(registry.make_room(None));
        tokio::time::timeout(std::time::Duration::from_millis(1), old_close.notified())
            .await
            .expect("the oldest idle connection is told to close");
        assert_eq!(
            registry.share(one),
            1,
            "a closing connection leaves the share"
        );
        assert!(
            !registry.make_room(Some(one)),
            "client one has only a busy one left"
        );
        assert!(registry.make_room(None));
        tokio::time::timeout(std::time::Duration::from_millis(1), other_close.notified())
            .await
            .expect("then the other client's idle one");
        assert!(!registry.make_room(None), "only a busy connection is left");
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(1), busy_close.notified())
                .await
                .is_err()
        );
    }

    #[test]
    fn a_closed_connection_leaves_its_share() {
        let registry = Arc::new(Registry::default());
        let one = ClientKey::of(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let guard = registry.register(one, Arc::new(Activity::new()), Arc::new(Notify::new()));
        assert_eq!(registry.share(one), 1);
        drop(guard);
        assert_eq!(registry.share(one), 0);
        assert!(!registry.make_room(None));
    }
}
