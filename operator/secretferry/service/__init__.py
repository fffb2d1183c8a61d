"""secretferry.service."""
