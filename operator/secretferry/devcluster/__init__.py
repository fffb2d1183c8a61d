"""secretferry.devcluster."""
