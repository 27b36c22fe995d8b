"""Foundation shared by every layer: errors, type aliases and the identities of policies and rules,
time slices for long loops and the garbage-collector policy. No Kubernetes knowledge here."""
