"""What checking a policy at admission knows and shares, below every rule kind.

The :class:`.checker.Checker` that gathers one policy's problems and warnings, with CEL
compilation and the checks every user expression and reference gets (:mod:`.checker`); what a
policy can know of its inputs when it is admitted (:mod:`.shapes`) and what a namespaced policy
may read (:mod:`.boundary`, which :mod:`kinitiras_py.refs` enforces at run time too).
"""
