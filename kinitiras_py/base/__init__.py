"""Foundation shared by every layer: errors, type aliases and the identities of policies and rules. No
Kubernetes knowledge here."""
