"""secretferry.kube."""
