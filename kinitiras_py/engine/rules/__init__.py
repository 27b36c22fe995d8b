"""What the rule kinds beyond a CEL program build on: compiled forms, checks and runs of one rule.

``javascript`` rules with js-admissions-controller's contract (:mod:`.jsrules`) and their watch
hooks and state (:mod:`.jshooks`), ``sidecar`` templates (:mod:`.sidecars`), ``origin`` overriders
(:mod:`.origin`, their payloads checked by :mod:`.origin_values`). The kinds themselves, one typed
family, are in :mod:`..kinds`. A module here knows single rules, never a compiled policy:
:mod:`..policies` holds the policy made of them, :mod:`..running` runs rules that span policies.
"""
