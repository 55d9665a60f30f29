"""Reading ahead: an iterator of batches run in a background thread, a bounded number of batches ahead of its
consumer, so reading the next snapshot batch from MySQL overlaps with transforming and writing the current one (the
Paimon writer is Rust and releases the GIL; socket reads, the C scan of the row packets and Arrow casts release it
too).

The producer owns everything it touches (the snapshot connection) while it runs; its exceptions reach the consumer
at the batch where they happened. Closing the iterator (or :meth:`Prefetch.stop`) stops and joins the producer,
which closes the source iterator in its own thread (so a streamed result is drained on the thread that read it).
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")

_END = object()
_POLL = 0.1  # seconds between checks of the stop flag while the queue is full


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class Prefetch(Generic[T]):
    """Iterate ``source`` in a daemon thread, at most ``depth`` items ahead. Use once, as an iterator."""

    def __init__(self, source: Iterator[T], depth: int = 1, name: str = "lakecdc-prefetch"):
        self._source = source
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._name = name
        self._finished = False

    def __iter__(self) -> "Prefetch[T]":
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        item = self._queue.get()
        if item is _END:
            self._join()
            raise StopIteration
        if isinstance(item, _Failure):
            self._join()
            raise item.error
        return item

    def _run(self) -> None:
        try:
            for item in self._source:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            self._put(_Failure(error))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                try:
                    close()
                except BaseException:  # noqa: BLE001 - closing after a failure already reported
                    pass

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def _join(self) -> None:
        self._finished = True
        if self._thread is not None:
            self._thread.join()

    def stop(self, abort: Callable[[], None] | None = None) -> None:
        """Stop the producer (it finishes its current batch, then closes the source) and wait for it. ``abort``
        is called first when the producer is still running: something that makes its blocking reads fail at once
        (closing the connection it reads), for when the source cannot be closed cleanly or need not be."""
        if self._finished:
            return
        self._stop.set()
        self._finished = True
        if self._thread is not None:
            if abort is not None and self._thread.is_alive():
                abort()
            while self._thread.is_alive():
                try:  # unblock a producer waiting on a full queue
                    self._queue.get(timeout=_POLL)
                except queue.Empty:
                    pass
            self._thread.join()

    def close(self) -> None:
        self.stop()

    def __del__(self) -> None:
        if not self._finished and self._thread is not None:
            self._stop.set()
