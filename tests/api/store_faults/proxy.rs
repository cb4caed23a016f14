//! A TCP proxy on loopback between the server and PostgreSQL that cuts and
//! restores connections: cut, every connection through it is closed and a
//! new one is closed as soon as it is accepted (the database is out of
//! reach); restored, connections are forwarded again.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct Proxy {
    pub addr: SocketAddr,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

struct State {
    up: AtomicBool,
    links: Mutex<Vec<JoinHandle<()>>>,
}

impl Proxy {
    /// A proxy to `target` (`host:port`), forwarding.
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let state = Arc::new(State {
            up: AtomicBool::new(true),
            links: Mutex::new(Vec::new()),
        });
        let st = state.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    continue;
                };
                if !st.up.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let target = target.clone();
                let link = tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&target).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
                let mut links = st.links.lock();
                links.retain(|l| !l.is_finished());
                links.push(link);
            }
        });
        Proxy {
            addr,
            state,
            accept,
        }
    }

    /// Closes every connection through the proxy and refuses new ones.
    pub fn cut(&self) {
        self.state.up.store(false, Ordering::SeqCst);
        for l in self.state.links.lock().drain(..) {
            l.abort();
        }
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.state.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}
