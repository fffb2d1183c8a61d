"""secretferry.models."""
