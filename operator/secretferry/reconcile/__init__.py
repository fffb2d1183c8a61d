"""secretferry.reconcile."""
