"""Which compiled policies and rules apply to an object: the policy index with its selectors and
stable order (:mod:`.selection`), then the policies' ``matchConditions`` (:mod:`.conditions`)."""
