"""Running the rules that apply to one object: override rules in order into one response patch
(:mod:`.overriding`, with the inject rules of every policy combined by :mod:`.injection`), and
validate rules into one verdict (:mod:`.validating`)."""
