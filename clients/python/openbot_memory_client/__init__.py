"""A typed Python client for the OpenBot Bot Memory API (`/v1`)."""

from openbot_memory_client.client import OPERATIONS, MemoryApiError, MemoryClient

__all__ = ["OPERATIONS", "MemoryApiError", "MemoryClient"]
