"""One bounded cache for what a process keeps of the lake between reads (Arrow datasets of
table snapshots, small tables held whole, Spark frames over the same files): at most
``size`` entries, the least recently used let go first, safe to use from the threads of
a night. Delta data files never change, so an entry named by a snapshot stays right."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable


class Bounded:
    """A least-recently-used map of at most ``size`` entries; ``on_evict`` is called with
    each value let go (outside the lock)."""

    def __init__(self, size: int, on_evict: Callable[[object], None] | None = None):
        self.size, self.on_evict = size, on_evict
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default=None):
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value) -> None:
        gone = []
        with self._lock:
            if key in self._items:
                gone.append(self._items.pop(key))
            self._items[key] = value
            while len(self._items) > self.size:
                gone.append(self._items.popitem(last=False)[1])
        if self.on_evict is not None:
            for old in gone:
                if old is not value:
                    self.on_evict(old)

    def pop(self, key: Hashable, default=None):
        with self._lock:
            return self._items.pop(key, default)

    def values(self) -> list:
        """The values, least recently used first."""
        with self._lock:
            return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items
