"""js-admissions-controller's watch hooks and ``state``, for one loaded javascript rule.

``jsa_init(state)`` runs once per policy version, then ``jsa_created(obj)`` for every object the
policy selects that exists already, then one hook per change: ``jsa_created(obj)``,
``jsa_updated(obj, old)``, ``jsa_deleted(obj)``. Parameters are bound by name, as for
``jsa_mutate``; each call runs under the script's own time and memory limits.

The state lives here, as JSON text (:class:`.jsruntime.State`), and is read and written only on
the script's JavaScript thread, inside a call: every call of one script runs there, one after
the other, so each sees what the call before it left (js-admissions' ``sync``). A function may
change the state only when it declares ``sync`` (``jsa_init`` always may); otherwise it sees a
deep-frozen copy, and what it tries to write there is not kept.

Nothing here knows where events come from: the webhook's informers (``cluster.jswatch``) or the
offline commands' ``--context`` objects (:func:`..running.watchhooks.start_offline`) call :meth:`Hooks.start` and the
event methods, in order. Each replica keeps its own state; replicas watching the same objects
converge, and a restart rebuilds the state because the informer's first list replays every
object through ``jsa_created``.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Iterable, Sequence
from functools import partial

from kinitiras_py.base.typedefs import JSON, Obj
from kinitiras_py.engine.evaluation import jsruntime

INIT = "jsa_init"
EVENTS = ("jsa_created", "jsa_updated", "jsa_deleted")
PARAMETERS: dict[str, tuple[str, ...]] = {
    INIT: ("state",), "jsa_created": ("obj", "sync", "state"), "jsa_updated": ("obj", "old", "sync", "state"),
    "jsa_deleted": ("obj", "sync", "state")}
"""What each hook can be given, by name."""
log = logging.getLogger("kinitiras_py.javascript")


class Hooks:
    """The hooks a script defines (with their parameters) and the state they keep."""

    def __init__(self, script: jsruntime.Script, parameters: dict[str, tuple[str, ...]], limit: int) -> None:
        self.script = script
        self.parameters = parameters
        """The parameters of each hook the script defines, by hook name."""
        self.state = jsruntime.State(limit)

    @property
    def watches(self) -> bool:
        """Whether the script follows objects (defines jsa_created, jsa_updated or jsa_deleted)."""
        return any(name in self.parameters for name in EVENTS)

    def binding(self, names: Sequence[str], early: bool = False, writable: bool | None = None
                ) -> jsruntime.Binding | None:
        """How a function with parameters ``names`` sees the state (None: it does not take it)."""
        if "state" not in names:
            return None
        return jsruntime.Binding(self.state, list(names).index("state"),
                                 "sync" in names if writable is None else writable, early)

    def start(self, existing: Iterable[Obj] = ()) -> concurrent.futures.Future[None]:
        """Queue jsa_init, then jsa_created for each of ``existing`` in the order given; the state is
        ready once they have run (the future is then done). Later events must be queued after this."""
        init = self._post(INIT, {}, early=True, writable=True)
        for obj in existing:
            self._post("jsa_created", {"obj": obj}, early=True)
        return self.script.queue(self._ready, init)

    def _ready(self, init: concurrent.futures.Future[JSON] | None) -> None:
        error = init.exception() if init is not None else None  # done: it ran before this, on this thread
        if error is not None and self.state.problem is None:
            self.state.problem = f"jsa_init failed, so the state is not what the script expects: {error}"
        self.state.ready = True

    def created(self, obj: Obj) -> None:
        """Queue jsa_created(obj)."""
        self._post("jsa_created", {"obj": obj})

    def updated(self, obj: Obj, old: Obj) -> None:
        """Queue jsa_updated(obj, old)."""
        self._post("jsa_updated", {"obj": obj, "old": old})

    def deleted(self, obj: Obj) -> None:
        """Queue jsa_deleted(obj)."""
        self._post("jsa_deleted", {"obj": obj})

    def _post(self, hook: str, values: dict[str, JSON], early: bool = False, writable: bool | None = None
              ) -> concurrent.futures.Future[JSON] | None:
        names = self.parameters.get(hook)
        if names is None:
            return None
        values = {**values, "sync": True, "state": None}  # the state is put in on the script's thread
        try:
            future = self.script.submit(hook, [values.get(name) for name in names],
                                        self.binding(names, early, writable))
        except jsruntime.JsError as e:  # an object JSON cannot carry (never one from the API server)
            self._report(hook, values.get("obj"), e)
            return None
        future.add_done_callback(partial(self._done, hook, values.get("obj")))
        return future

    def _done(self, hook: str, obj: JSON, future: concurrent.futures.Future[JSON]) -> None:
        error = future.exception()
        if error is not None:
            self._report(hook, obj, error)

    def _report(self, hook: str, obj: JSON, error: BaseException) -> None:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        what = f" for {obj.get('kind') if isinstance(obj, dict) else ''} {meta.get('namespace') or ''}/" \
               f"{meta.get('name') or ''}" if obj is not None else ""
        # Once the state has failed, every later hook fails alike: only the first is worth a warning.
        level = logging.DEBUG if self.state.problem is not None and str(error) == self.state.problem \
            else logging.WARNING
        log.log(level, f"{hook} failed{what}: {error}", extra={"script": self.script.name})
