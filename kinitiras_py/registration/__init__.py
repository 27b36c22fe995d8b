"""Webhook configuration management: the desired configurations (pure) and applying them."""
