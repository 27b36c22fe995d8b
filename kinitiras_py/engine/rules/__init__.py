"""The rule kinds that are more than a CEL program: what each compiles to and how it runs.

A module per kind holds its compiled form, its checks and its step on one object: ``javascript``
rules with js-admissions-controller's contract (:mod:`.jsrules`) and their watch hooks and state
(:mod:`.jshooks`), ``sidecar`` templates (:mod:`.sidecars`), ``origin`` overriders
(:mod:`.origin`, their payloads checked by :mod:`.origin_values`). A kind knows single rules, never
a compiled policy: :mod:`..policies` holds the policy made of them, :mod:`..running` runs rules
that span policies.
"""
