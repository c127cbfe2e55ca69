"""One remote context per process and configuration.

A :class:`RemoteContext` is what this process knows about one remote location (a URL and
its ``storage_options``): the resolved :class:`lsio._storage.RemoteConfig` with its
credentials, the native ``_core.RemoteStore`` objects built from it, and the lock under
which credentials are refreshed. :class:`lsio.Array`, :class:`lsio.Group` (its node reads),
:class:`lsio.StringArray` and :func:`lsio.read_ranges` all reach the network through one,
so a credentials refresh reaches every store that requests go through: before, each
object refreshed (or, groups and string arrays, never refreshed) a store of its own, and
threads racing the first use of one unpickled array built several stores, refreshing one
the engine did not read through.

Contexts are looked up by :func:`context` (key: the process id, the URL, the storage
options as given, and the environment ``resolve`` reads), held weakly by the registry and
strongly by the objects using them: one is resolved (the credentials callable called) once
per process and configuration while anything uses it. A forked child never uses its
parent's: the registry is emptied in the child (``os.register_at_fork``) and every holder
looks its context up again when ``os.getpid()`` changed (:class:`Handle`), so a forked
DataLoader worker resolves in its own process, with its own locks and connections.

Pickling stays with the holders: they pickle their URL and ``storage_options`` (a
:class:`Handle` pickles as exactly that), never a context.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Mapping, Optional, Tuple

from . import _storage
from ._storage.credentials import profile_files

__all__ = ["RemoteContext", "Handle", "ProcessLock", "context"]

_registry_lock = threading.RLock()
_contexts: "weakref.WeakValueDictionary[tuple, RemoteContext]" = weakref.WeakValueDictionary()


def _after_fork_in_child() -> None:
    # Another thread may have held the lock at fork time; it will never release it here.
    global _registry_lock, _contexts
    _registry_lock = threading.RLock()
    _contexts = weakref.WeakValueDictionary()


os.register_at_fork(after_in_child=_after_fork_in_child)


class ProcessLock:
    """A ``threading.Lock`` that a forked child replaces on first use: one held by another
    thread of the parent at fork time would never be released in the child."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _current(self) -> threading.Lock:
        pid = os.getpid()
        if self._pid != pid:
            with _registry_lock:  # itself reset in the child, so free there
                if self._pid != pid:
                    self._lock = threading.Lock()
                    self._pid = pid  # after the new lock: a thread seeing this pid sees it
        return self._lock

    def __enter__(self) -> "ProcessLock":
        self._current().acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._lock.release()


# Environment variables resolve() may read: a context resolved under other values is not
# the same configuration.
_ENV_NAMES = ("HOME", "SSL_CERT_FILE", "LSIO_REQUEST_CONCURRENCY")


def _environment_key() -> Tuple[Any, ...]:
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_") or k in _ENV_NAMES))
    files = []
    # The AWS profile files, by identity and version: rewriting them is a new configuration.
    for path in profile_files():
        try:
            st = os.stat(path)
            files.append((path, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            files.append((path, None))
    return env + tuple(files)


def _freeze(value: Any) -> Any:
    """A hashable stand-in for a storage option value. Types are part of it (1 and True
    resolve differently); unhashable objects count by identity, which stays unique while
    the context (holding the options) is alive."""
    if isinstance(value, Mapping):
        return ("map", tuple(sorted(((repr(k), _freeze(v)) for k, v in value.items()), key=lambda kv: kv[0])))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, os.PathLike):
        return ("path", os.fspath(value))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return (type(value), value)


class RemoteContext:
    """This process's state for one URL + ``storage_options``: see the module docstring.

    ``store()`` is the shared native store (metadata reads, listings, ``read_ranges``);
    ``new_store()`` builds one of the same configuration with counters of its own (an
    Array's, for ``Array.stats()``). Both are kept up to date by ``refresh_if_needed``,
    which every use calls: it calls the credentials callable again once their expiry is
    within ``REFRESH_MARGIN`` and hands the new credentials to every live store.
    """

    def __init__(self, url: str, storage_options: Mapping, config: "_storage.RemoteConfig") -> None:
        self.url = url
        self.storage_options = storage_options
        self.pid = os.getpid()
        self._config = config
        self._lock = threading.Lock()  # a context never crosses a fork (see the module docstring)
        self._store: Any = None
        self._stores: "weakref.WeakSet[Any]" = weakref.WeakSet()

    @property
    def config(self) -> "_storage.RemoteConfig":
        """The configuration with the credentials in use now."""
        return self._config

    @property
    def display(self) -> str:
        """The URL for messages and ``Array.path`` (normalised, without secrets)."""
        return self._config.display_url

    def refresh_if_needed(self) -> None:
        """Calls a credentials callable again once their expiry is near (on this thread) and
        gives every store of this context the new credentials."""
        if not self._config.needs_refresh():
            return
        with self._lock:
            fresh = self._config.refresh_if_needed()
            if fresh is None:  # another thread refreshed while this one waited
                return
            core = fresh.to_core()
            for store in list(self._stores):
                store.set_credentials(core["access_key_id"], core["secret_access_key"],
                                      core["session_token"], core["token"])
            self._config = fresh

    def store(self) -> Any:
        """The native store shared by this context's metadata reads, with fresh credentials."""
        self.refresh_if_needed()
        store = self._store
        if store is None:
            with self._lock:
                if self._store is None:
                    self._store = self._build()
                store = self._store
        return store

    def new_store(self) -> Any:
        """A native store of its own (own counters), kept up to date like ``store()``."""
        self.refresh_if_needed()
        with self._lock:
            return self._build()

    def _build(self) -> Any:
        # Under self._lock: a refresh either happened before (the new store starts with its
        # credentials) or happens after (it finds the store in self._stores).
        from . import _core

        store = _core.RemoteStore(self._config.to_core())
        self._stores.add(store)
        return store


def context(url: str, storage_options: Optional[Mapping]) -> RemoteContext:
    """This process's context for ``url`` + ``storage_options``, resolved on first use
    (``_storage.resolve``: validation, environment, a credentials callable's first call)."""
    options = storage_options if storage_options is not None else {}
    key = (os.getpid(), url, _freeze(options), _environment_key())
    with _registry_lock:
        ctx = _contexts.get(key)
        if ctx is None:
            # Resolved under the lock, so racing first uses call a credentials callable once.
            ctx = RemoteContext(url, options, _storage.resolve(url, options))
            _contexts[key] = ctx
        return ctx


class Handle:
    """What an Array, a Group's node reader or a StringArray keeps: the URL, the
    ``storage_options`` as given, and this process's context for them (looked up again
    after a fork). Pickles as ``(url, storage_options)``."""

    __slots__ = ("url", "storage_options", "_ctx")

    def __init__(self, url: str, storage_options: Optional[Mapping]) -> None:
        self.url = url
        self.storage_options = storage_options
        self._ctx: Optional[RemoteContext] = None

    def get(self) -> RemoteContext:
        ctx = self._ctx
        if ctx is None or ctx.pid != os.getpid():
            ctx = self._ctx = context(self.url, self.storage_options)
        return ctx

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (Handle, (self.url, self.storage_options))

    def __repr__(self) -> str:
        return f"Handle({_storage.redact(self.url)!r})"

