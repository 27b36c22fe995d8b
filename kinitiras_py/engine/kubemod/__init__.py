"""KubeMod's rule language on our engine: its JSONPath select dialect parsed once and compiled to
CEL (:mod:`.syntax`, :mod:`.tocel`), its match criteria (:mod:`.criteria`), and patch
operations that fan out per selected item with templated values (:mod:`.fanout`)."""
