//! A TCP listener whose connections a handler can kill (for `Fault::DropConnection`): once killed, every
//! read and write fails, so hyper closes the connection without sending a response.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

pub(crate) struct KillableListener(pub(crate) TcpListener);

pub(crate) struct KillableStream {
    inner: TcpStream,
    killed: Arc<AtomicBool>,
}

/// Per-connection handle, available to middleware as `ConnectInfo<ConnHandle>`.
#[derive(Clone, Debug)]
pub(crate) struct ConnHandle(Arc<AtomicBool>);

impl ConnHandle {
    pub(crate) fn kill(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Listener for KillableListener {
    type Io = KillableStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((inner, addr)) => {
                    let _ = inner.set_nodelay(true);
                    let stream = KillableStream {
                        inner,
                        killed: Arc::new(AtomicBool::new(false)),
                    };
                    return (stream, addr);
                }
                // Too many open files and the like: back off briefly, as axum's own listener does.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        Self(stream.io().killed.clone())
    }
}

fn killed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "connection dropped by fault injection",
    )
}

impl KillableStream {
    fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.is_killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.is_killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.is_killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
