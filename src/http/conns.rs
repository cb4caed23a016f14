//! Open connections, capped (§15): every accepted connection is registered
//! with the time since which it waits on its client (for a request's head,
//! or for the rest of a body); while the server works on a request or
//! streams an answer it waits on nobody. At the cap, a new connection
//! closes the one stalled longest, so that a health probe or a click is
//! still served however many clients hold connections open without sending.
//!
//! A connection is closed with `shutdown(2)` on its socket: its worker sees
//! the end of the stream and drops it, freeing the descriptor. The socket is
//! first checked to still have the peer it was registered with (a closed
//! connection's descriptor number may already belong to a new one).

use std::any::Any;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use actix_web::body::{BodySize, BoxBody, EitherBody, MessageBody};
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{Error, HttpRequest};
use parking_lot::Mutex;

/// Marks a connection that waits on nobody (the server's turn).
const BUSY: i64 = i64::MAX;

/// What one connection waits for, shared by its requests.
pub struct ConnState {
    /// Milliseconds since [`Conns`]'s start from which the connection has
    /// waited on its client, or [`BUSY`].
    waiting_since: AtomicI64,
    conns: Arc<Conns>,
}

impl ConnState {
    fn wait(&self) {
        self.waiting_since
            .store(self.conns.now_ms(), Ordering::Relaxed);
    }
    fn busy(&self) {
        self.waiting_since.store(BUSY, Ordering::Relaxed);
    }
}

struct Entry {
    fd: RawFd,
    peer: SocketAddr,
    state: Arc<ConnState>,
}

/// The registry of open connections of one server.
pub struct Conns {
    cap: usize,
    start: Instant,
    open: Mutex<HashMap<u64, Entry>>,
    next_id: AtomicU64,
    evicted: AtomicU64,
    last_warned: AtomicI64,
}

/// Lives in a connection's data: unregisters it when the connection ends.
struct Registered {
    id: u64,
    state: Arc<ConnState>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.state.conns.open.lock().remove(&self.id);
    }
}

impl Conns {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap: cap.max(1),
            start: Instant::now(),
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            last_warned: AtomicI64::new(-1000),
        })
    }

    fn now_ms(&self) -> i64 {
        self.start.elapsed().as_millis() as i64
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().len()
    }

    /// Connections closed to make room so far.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// `HttpServer::on_connect`: registers the connection, first closing
    /// the one stalled longest if the cap is reached.
    pub fn on_connect(self: &Arc<Self>, conn: &dyn Any, data: &mut Extensions) {
        let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() else {
            return;
        };
        let Ok(peer) = tcp.peer_addr() else { return };
        let state = Arc::new(ConnState {
            waiting_since: AtomicI64::new(self.now_ms()),
            conns: self.clone(),
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut open = self.open.lock();
        while open.len() >= self.cap {
            if !self.evict_one(&mut open) {
                break;
            }
        }
        open.insert(
            id,
            Entry {
                fd: tcp.as_raw_fd(),
                peer,
                state: state.clone(),
            },
        );
        drop(open);
        data.insert(Registered { id, state });
    }

    /// Closes the connection that has waited on its client longest; false
    /// when every connection is the server's turn.
    fn evict_one(&self, open: &mut HashMap<u64, Entry>) -> bool {
        let Some((&id, _)) = open
            .iter()
            .filter(|(_, e)| e.state.waiting_since.load(Ordering::Relaxed) != BUSY)
            .min_by_key(|(_, e)| e.state.waiting_since.load(Ordering::Relaxed))
        else {
            return false;
        };
        if let Some(e) = open.remove(&id)
            && same_peer(e.fd, e.peer)
        {
            // SAFETY: shutdown(2) on a descriptor whose socket was just
            // checked to be this connection's; it does not close the
            // descriptor, its owner still does.
            unsafe { libc::shutdown(e.fd, libc::SHUT_RDWR) };
            let n = self.evicted.fetch_add(1, Ordering::Relaxed) + 1;
            // One line a second at most, however many are closed.
            let now = self.now_ms();
            let last = self.last_warned.load(Ordering::Relaxed);
            if now - last >= 1000
                && self
                    .last_warned
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                tracing::warn!(
                    cap = self.cap,
                    closed_so_far = n,
                    "connection cap reached; closing the connections stalled longest"
                );
            }
        }
        true
    }
}

/// Whether descriptor `fd` is still a socket connected to `peer`.
fn same_peer(fd: RawFd, peer: SocketAddr) -> bool {
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getpeername(2) writes at most `len` bytes into `addr`.
    let r = unsafe {
        libc::getpeername(
            fd,
            (&mut addr as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return false;
    }
    let got = match addr.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a: &libc::sockaddr_in =
                unsafe { &*(&addr as *const _ as *const libc::sockaddr_in) };
            SocketAddr::from((
                std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 =
                unsafe { &*(&addr as *const _ as *const libc::sockaddr_in6) };
            SocketAddr::from((
                std::net::Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
            ))
        }
        _ => return false,
    };
    got == peer
}

/// The connection of `req`, if registered.
fn state_of(req: &HttpRequest) -> Option<&Arc<ConnState>> {
    req.conn_data::<Registered>().map(|r| &r.state)
}

/// The body of `req` is being read: its connection waits on the client.
pub fn reading_body(req: &HttpRequest) {
    if let Some(s) = state_of(req) {
        s.wait();
    }
}

/// The body of `req` has arrived: the server's turn.
pub fn body_read(req: &HttpRequest) {
    if let Some(s) = state_of(req) {
        s.busy();
    }
}

/// Middleware: a request with a head is the server's turn until it reads a
/// body; once the answer is sent the connection waits for the next head.
/// A 408 (a body that did not arrive in time) closes the connection.
pub async fn track(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, BoxBody>>, Error> {
    let state = state_of(req.request()).cloned();
    if let Some(s) = &state {
        s.busy();
    }
    let mut res = next.call(req).await?;
    if res.status() == StatusCode::REQUEST_TIMEOUT {
        res.response_mut()
            .head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
    }
    let Some(state) = state else {
        return Ok(res.map_into_left_body());
    };
    if !matches!(res.response().body().size(), BodySize::Stream) {
        // A sized answer goes out at once.
        state.wait();
        return Ok(res.map_into_left_body());
    }
    Ok(res.map_body(move |_, body| {
        EitherBody::right(BoxBody::new(Tracked {
            body: body.boxed(),
            _done: Done(state),
        }))
    }))
}

/// Marks the connection as waiting for its next request when a streamed
/// answer has ended (or was dropped).
struct Done(Arc<ConnState>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.wait();
    }
}

struct Tracked {
    body: BoxBody,
    _done: Done,
}

impl MessageBody for Tracked {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<bytes::Bytes, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_next(cx)
    }
}

/// Connections that may still be closing above the cap (the server's
/// accept limit is the cap plus this).
pub const CLOSING: usize = 16;

/// The default cap: the open-file limit less the descriptors kept for the
/// store, the deliveries, the process itself and the connections still
/// closing (a quarter of the limit, at least 64 plus the database pool).
pub fn default_cap(nofile: u64, database_pool: u32) -> usize {
    let reserve = (nofile / 4).max(64 + u64::from(database_pool));
    nofile.saturating_sub(reserve).max(16) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_keeps_descriptors_for_the_rest() {
        assert_eq!(default_cap(256, 10), 182);
        assert_eq!(default_cap(1024, 10), 768);
        assert_eq!(default_cap(1 << 20, 10), 786_432);
        assert_eq!(default_cap(40, 10), 16);
    }

    #[test]
    fn a_socket_is_recognised_by_its_peer() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        assert!(same_peer(s.as_raw_fd(), peer));
        assert!(!same_peer(s.as_raw_fd(), l.local_addr().unwrap()));
        assert!(same_peer(c.as_raw_fd(), l.local_addr().unwrap()));
        assert!(!same_peer(l.as_raw_fd(), peer), "a listener has no peer");
    }
}
