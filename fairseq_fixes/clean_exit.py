"""A training that ends inside an epoch exits cleanly.

fairseq-train (0.12 and main) aborted at exit (``terminate called without an active
exception``, status 134, after "done training") when it ended inside an epoch: fairseq's
``BackgroundConsumer``, a daemon thread, is still collating the next batches when Python
finalizes, and the thread is killed inside a torch call. Its consumers now put with a timeout
and stop when asked; an ``atexit`` handler asks them and waits for them, before finalization.
``iterators.BackgroundConsumer`` is a class fairseq instantiates, so the name is replaced by a
subclass (:class:`StoppableConsumer`).
"""
import atexit
import queue
import threading
import weakref

import torch
from fairseq.data import iterators

from .patching import FIX, patch, replace

_STOP = threading.Event()
_CONSUMERS = weakref.WeakSet()


class StoppableConsumer(iterators.BackgroundConsumer):
    """fairseq's BackgroundConsumer (the thread that fills BufferedIterator's queue), which
    stops when ``_STOP`` is set instead of being killed inside a torch call at exit."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _CONSUMERS.add(self)

    def _put(self, item):
        while not _STOP.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(self):
        if self.cuda_device is not None:
            torch.cuda.set_device(self.cuda_device)
        try:
            for item in self._source:
                if not self._put(item):
                    return
                self.count += 1
                if self._max_len is not None and self.count >= self._max_len:
                    break
            self._put(iterators._sentinel)
        except Exception as e:
            self._put(e)


def stop_consumers(timeout=30.0):
    """Ask every running consumer to stop, and wait for them (atexit)."""
    _STOP.set()
    for consumer in list(_CONSUMERS):
        consumer.join(timeout)


@patch(FIX, "fairseq-train ending inside an epoch, for every model: no abort at exit")
def patch_clean_exit():
    """fairseq's background batch consumers stop cleanly at exit."""
    if iterators.BackgroundConsumer is not StoppableConsumer:
        atexit.register(stop_consumers)
    replace(iterators, "BackgroundConsumer", StoppableConsumer)
