"""The policy engine: pure functions from (policies, object, resolved values) to results.

Nothing here awaits, performs I/O or imports the cluster, refs or webhook layers. Value
references are resolved by the caller and passed in as ``params``.

Its rooms, each importing only those listed before it:

* :mod:`.objects`: the object under admission, field paths, selectors and patches;
* :mod:`.evaluation`: running CEL and JavaScript;
* :mod:`.rendering`, :mod:`.kubemod`, :mod:`.cue`: templates, KubeMod selects and ``cue`` programs
  compiled to CEL;
* :mod:`.rules`: the rule kinds beyond a CEL program (javascript, sidecar, origin);
* :mod:`.policies`: policies compiled once per version, and the results naming them;
* :mod:`.matching`: which policies and rules apply to an object;
* :mod:`.running`: running them on an object into a mutation or a verdict.
"""
