"""``kinitiras-py bench``: engine time per admission request, against growing policy sets.

``workload`` builds the policies and the Pod; ``runner`` compiles them and times
``Engine.admit`` request by request; ``report`` prints the tables.
"""
