//! Round trips, counted on the wire: a TCP relay between the clients and the
//! Postgres server that counts how many times a client starts sending after
//! the server last sent. A request/response protocol pays one network round
//! trip each time; several messages sent together (a pipeline, or several
//! statements in one simple-query message) count once.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A relay listening on a loopback port, forwarding to one server address.
pub struct Relay {
    port: u16,
    round_trips: Arc<AtomicU64>,
}

impl Relay {
    /// Starts relaying 127.0.0.1:(a free port) to `server`; the listener
    /// lives as long as the bench process.
    pub fn start(server: SocketAddr) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let round_trips = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&round_trips);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if let Ok(upstream) = TcpStream::connect(server) {
                    relay(client, upstream, Arc::clone(&count));
                }
            }
        });
        Ok(Relay { port, round_trips })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Round trips counted so far, over every connection.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }
}

fn relay(client: TcpStream, server: TcpStream, count: Arc<AtomicU64>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // Whether the client sent last; a client send after a server send is a
    // new round trip. The server-to-client pump records its turn before it
    // forwards the reply, so the client's next request always sees it.
    let client_last = Arc::new(AtomicBool::new(false));
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up_flag = Arc::clone(&client_last);
    std::thread::spawn(move || {
        pump(client, server, |_| {
            if !up_flag.swap(true, Ordering::SeqCst) {
                count.fetch_add(1, Ordering::SeqCst);
            }
        })
    });
    std::thread::spawn(move || {
        pump(s2, c2, |_| client_last.store(false, Ordering::SeqCst));
    });
}

fn pump(mut from: TcpStream, mut to: TcpStream, mut on_read: impl FnMut(usize)) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                on_read(n);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
