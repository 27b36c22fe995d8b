"""The rule kinds, one typed family: a module per kind, holding its compiled form, its compilation
and its step.

Override kinds (what an ``overriders`` entry may hold) are :mod:`.template`, :mod:`.sidecar`,
:mod:`.inject`, :mod:`.cue`, :mod:`.cel`, :mod:`.javascript`, :mod:`.plaintext` (with KubeMod
selects, :mod:`.select`) and :mod:`.origin`; each compiles to a frozen dataclass with a ``step``
that changes the working object of :class:`.base.OverrideStep`. Validate kinds (template, cue, cel,
javascript) compile to checks with a ``step`` that says why the object fails, if it does.
:mod:`.base` holds what every step is given and the protocols the request path dispatches on: a
rule is run by calling ``step`` on each of its kinds in order, never by asking what they are.
A kind knows one part of one rule: :mod:`..policies` assembles rules and policies from them,
:mod:`..running` runs them; the helpers a kind builds on are in :mod:`..rules` and below.
"""
