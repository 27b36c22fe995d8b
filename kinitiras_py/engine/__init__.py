"""The policy engine: pure functions from (policies, object, resolved values) to results.

Nothing here awaits, performs I/O or imports the cluster, refs or webhook layers. Value
references are resolved by the caller and passed in as ``params``.
"""
