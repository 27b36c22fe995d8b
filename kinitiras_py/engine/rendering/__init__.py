"""Templates → CEL text, used when a policy is admitted. Pure: dicts in, CEL source out."""
