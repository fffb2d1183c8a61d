"""secretferry: keeps Kubernetes Secrets in step with an Infisical-compatible secrets service."""

__version__ = "0.1.0"
