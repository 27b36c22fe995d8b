"""Running expressions: CEL (:mod:`.cel`: compilation, cost bounds, extension functions, result
memory, conversions, :mod:`.celbindings` for a request's variables), regular expressions as RE2
runs them (:mod:`.regexes`), quantities, and the JavaScript runtime (:mod:`.jsruntime`)."""
