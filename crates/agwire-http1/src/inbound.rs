//! A request body read from the connection only when its reader asks.
//!
//! The connection's task owns the socket; the handler holds an [`Inbound`]
//! body. Its `poll_frame` marks the body as wanted and parks; the
//! connection sees that, reads one piece from the socket and hands it over.
//! So nothing is read ahead of the handler (`Expect: 100-continue` is
//! answered only once the handler reads, and a handler that rejects a
//! request on its headers never makes the client send its body), and a body
//! costs one small shared slot while it is being read and nothing after.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::BodyError;

#[derive(Debug, Default)]
struct Slot {
    /// The next piece, handed over and not yet taken.
    piece: Option<Bytes>,
    /// The reader is waiting for a piece.
    wanted: bool,
    /// The body is complete (`Ok`) or broken off (`Err`).
    end: Option<Result<(), BodyError>>,
    /// The reader's task, woken when a piece or the end arrives.
    reader: Option<Waker>,
    /// The connection's task, woken when the reader wants a piece or
    /// leaves.
    connection: Option<Waker>,
    /// The reader dropped the body.
    gone: bool,
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The handler's side: an `http_body::Body` of the request's bytes.
#[derive(Debug)]
pub(crate) struct Inbound {
    slot: Arc<Mutex<Slot>>,
    /// Bytes still to come when the length was declared.
    remaining: Option<u64>,
}

/// The connection's side of an [`Inbound`].
#[derive(Debug)]
pub(crate) struct Feed {
    slot: Arc<Mutex<Slot>>,
}

/// A body for a request whose bytes are still on the socket.
pub(crate) fn channel(length: Option<u64>) -> (Inbound, Feed) {
    let slot = Arc::new(Mutex::new(Slot::default()));
    (
        Inbound {
            slot: slot.clone(),
            remaining: length,
        },
        Feed { slot },
    )
}

/// What the connection should do for the body now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Demand {
    /// Read a piece and [`Feed::give`] it.
    Read,
    /// Nothing until the reader asks again (the connection's waker is
    /// registered).
    Wait,
    /// The reader dropped the body: nobody will read the rest.
    Gone,
}

impl Feed {
    /// Whether the reader waits for a piece; registers `cx` otherwise.
    pub(crate) fn demand(&self, cx: &mut Context<'_>) -> Demand {
        let mut slot = lock(&self.slot);
        if slot.gone {
            Demand::Gone
        } else if slot.wanted && slot.piece.is_none() {
            Demand::Read
        } else {
            slot.connection = Some(cx.waker().clone());
            Demand::Wait
        }
    }

    /// Hands the reader its next piece.
    pub(crate) fn give(&self, piece: Bytes) {
        let mut slot = lock(&self.slot);
        slot.piece = Some(piece);
        slot.wanted = false;
        if let Some(waker) = slot.reader.take() {
            waker.wake();
        }
    }

    /// Ends the body: complete, or broken off.
    pub(crate) fn end(&self, end: Result<(), BodyError>) {
        let mut slot = lock(&self.slot);
        slot.end = Some(end);
        if let Some(waker) = slot.reader.take() {
            waker.wake();
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        let mut slot = lock(&self.slot);
        if slot.end.is_none() {
            slot.end = Some(Err(BodyError::Incomplete("the connection ended")));
        }
        if let Some(waker) = slot.reader.take() {
            waker.wake();
        }
    }
}

impl Drop for Inbound {
    fn drop(&mut self) {
        let mut slot = lock(&self.slot);
        slot.gone = true;
        if let Some(waker) = slot.connection.take() {
            waker.wake();
        }
    }
}

impl Body for Inbound {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let mut slot = lock(&this.slot);
        if let Some(piece) = slot.piece.take() {
            if let Some(remaining) = &mut this.remaining {
                *remaining = remaining.saturating_sub(piece.len() as u64);
            }
            return Poll::Ready(Some(Ok(Frame::data(piece))));
        }
        match slot.end.take() {
            Some(Ok(())) => {
                slot.end = Some(Ok(()));
                Poll::Ready(None)
            }
            Some(Err(error)) => {
                slot.end = Some(Err(BodyError::Incomplete("already reported")));
                Poll::Ready(Some(Err(error)))
            }
            None => {
                slot.wanted = true;
                slot.reader = Some(cx.waker().clone());
                if let Some(waker) = slot.connection.take() {
                    waker.wake();
                }
                Poll::Pending
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.remaining
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
