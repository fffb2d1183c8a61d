"""secretferry.handlers."""
