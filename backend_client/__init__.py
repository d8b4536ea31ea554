"""The Door DKS API contract (``models``, ``rules``) and its typed async client."""

from backend_client import models, rules

__all__ = ["models", "rules"]
