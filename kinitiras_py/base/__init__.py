"""Foundation shared by every layer: errors and type aliases. No Kubernetes knowledge here."""
