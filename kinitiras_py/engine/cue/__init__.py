"""kinitiras ``cue`` rules compiled to CEL when a policy is admitted (:mod:`.compiler`)."""
