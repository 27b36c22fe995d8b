"""Running expressions: CEL (:mod:`.cel`: compilation, cost bounds, extension functions, result
memory, conversions, :mod:`.celbindings` for a request's variables and :mod:`.conversionrecord`
for what they projected and which of them a change keeps), regular expressions as RE2
runs them (:mod:`.regexes`), quantities, and the JavaScript runtime (:mod:`.jsruntime`)."""
